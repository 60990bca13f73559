import Foundation
import Glibc
import Platform

/// Notices what other processes commit to the spool (`scan`, `spool retry`) without polling: an inotify watch on
/// the spool's directory wakes one thread when the write-ahead log or the database file is written, and it calls
/// `onChange` when SQLite's `data_version` says another connection committed (a checkpoint, which also writes the
/// database file, changes no data and wakes nobody). The sinks subscribe, so a scan spooled by another process is
/// delivered within milliseconds while an idle service sleeps (issue 27: an idle box sleeps).
///
/// The directory is watched, not the files: SQLite creates the `-wal` file with the first writer and may remove it
/// when the last connection closes. Without inotify (no watches left) it falls back to looking at `data_version`
/// every `fallbackInterval` seconds, as the sinks once did each on their own.
public final class SpoolChangeWatch: Service {
    public let name = "spool-watch"
    /// How often `data_version` is looked at when inotify is unavailable.
    public static let fallbackInterval: Double = 2

    private let spool: Spool
    private let onChange: @Sendable () -> Void
    private let control = ReaderControl()
    private let thread = ReaderThread(name: "spool-watch")
    /// How many times `onChange` was called (tests, benchmarks).
    private let changes = Mutex(0)

    public init(spool: Spool, onChange: @escaping @Sendable () -> Void) {
        self.spool = spool
        self.onChange = onChange
    }

    public var changesNoticed: Int { changes.withLock { $0 } }

    /// Starts the watch thread; returns once the watch is in place, so nothing committed after `start()` is missed.
    public func start() {
        guard control.markStarted() else { return }
        let directory = (spool.path as NSString).deletingLastPathComponent
        let file = (spool.path as NSString).lastPathComponent
        thread.start(readyWithin: 2) { [self] ready in
            watch(directory: directory.isEmpty ? "." : directory, names: [file, file + "-wal"], ready: ready)
        }
    }

    public func stop(deadline: Double) {
        thread.expectEnd()
        guard control.requestStop() else { return }
        _ = thread.waitForEnd(until: deadline)
    }

    /// After a write to the log, when `data_version` is looked at (seconds after the write): a writer appends its
    /// frames before it marks the commit in the shared-memory index (which inotify cannot see), so the first look
    /// may come too early; the later ones catch the commit without waiting for the writer's next write.
    static let lookDelays: [Double] = [0, 0.01, 0.05, 0.2]

    private func watch(directory: String, names: Set<String>, ready: () -> Void) {
        var lastVersion = (try? spool.dataVersion()) ?? 0
        // -1 without inotify: poll() then passes over it and the loop looks at `data_version` on a timer.
        let inotify = SpoolChangeWatch.inotify(directory)
        defer { if inotify >= 0 { close(inotify) } }
        ready()
        var buffer = [UInt8](repeating: 0, count: 4096)
        // The monotonic times of the looks still to come after the latest write; empty while nothing was written.
        var looks: [Double] = []
        while !control.isStopping {
            var fds = [
                pollfd(fd: control.wakePipe?.readFD ?? -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
            ]
            var now = MonotonicClock.now()
            let until = inotify < 0 ? now + SpoolChangeWatch.fallbackInterval : looks.first ?? .infinity
            let timeout = control.pollTimeout(until: until, now: now)
            let polled = try? systemCall("poll") { WorkerActivity.waiting { poll(&fds, nfds_t(fds.count), timeout) } }
            guard polled != nil else { continue }
            if fds[0].revents != 0 { control.wakePipe?.drain() }
            now = MonotonicClock.now()
            if inotify < 0 {
                looks = [now]
            } else if fds[1].revents != 0, SpoolChangeWatch.drain(inotify, into: &buffer, names: names) {
                looks = SpoolChangeWatch.lookDelays.map { now + $0 }
            }
            guard let next = looks.first, next <= now else { continue }
            looks.removeAll { $0 <= now }
            let version = (try? spool.dataVersion()) ?? lastVersion
            guard version != lastVersion else { continue }
            lastVersion = version
            looks.removeAll()
            changes.withLock { $0 += 1 }
            onChange()
        }
    }

    /// An inotify descriptor watching `directory` for writes and new files; -1 without inotify.
    private static func inotify(_ directory: String) -> Int32 {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return -1 }
        guard inotify_add_watch(fd, directory, UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO)) >= 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// Reads the queued events (a bounded number of reads: a file written without pause beside the spool must not
    /// keep this thread here); true when one concerned a file in `names`.
    private static func drain(_ fd: Int32, into buffer: inout [UInt8], names: Set<String>) -> Bool {
        var relevant = false
        for _ in 0..<16 {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return relevant }
            var offset = 0
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), then `len` bytes of NUL-padded name.
            while offset + 16 <= count {
                let length = buffer.withUnsafeBytes {
                    Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                }
                let name = buffer[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 }
                if names.contains(String(decoding: name, as: UTF8.self)) { relevant = true }
                offset += 16 + length
            }
        }
        return relevant
    }
}
