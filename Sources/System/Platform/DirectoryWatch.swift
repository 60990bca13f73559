import Glibc

/// Waits for files to appear in one directory (inotify: a file renamed into it or closed after writing), so a
/// command that waits for another process's file sleeps until it changes instead of polling it.
public final class DirectoryWatch {
    private let fd: FileDescriptor

    /// Nil when inotify is unavailable (no watches left, a filesystem without it): the caller polls instead.
    public init?(_ directory: String) {
        let raw = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard raw >= 0 else { return nil }
        fd = FileDescriptor(adopting: raw)
        guard inotify_add_watch(raw, directory, UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE)) >= 0 else {
            return nil
        }
    }

    /// Sleeps until something changed in the directory, `wake` (a `WakePipe`'s read end, or -1) became readable,
    /// or `deadline` (monotonic seconds) passed; true when something changed. The events themselves are read and
    /// dropped: the caller looks at the file again. `wake` is left for its owner to drain.
    public func wait(until deadline: Double, orWake wake: Int32 = -1) -> Bool {
        var fds = [
            pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        let milliseconds = Int32(max(0, min(60_000, ((deadline - MonotonicClock.now()) * 1000).rounded(.up))))
        // A wait for a file to appear: a watched worker is not working meanwhile (`WorkerActivity`).
        let polled = try? systemCall("poll") { WorkerActivity.waiting { poll(&fds, 2, milliseconds) } }
        guard let ready = polled, ready > 0, fds[0].revents != 0
        else { return false }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while (try? fd.read(into: &buffer)) ?? 0 > 0 {}
        return true
    }
}
