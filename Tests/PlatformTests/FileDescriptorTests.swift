import Foundation
import Glibc
import Platform
import Testing

/// `FileDescriptor` against the kernel: what is open, what is closed (fcntl(F_GETFD) answers EBADF for a
/// closed descriptor, fcntl(2)), the flags pipe2(2) sets, and a read interrupted by a signal (read(2): EINTR
/// when a handler installed without SA_RESTART interrupts a blocking read).
@Suite(.serialized)
struct FileDescriptorTests {
    /// Whether descriptor `raw` of this process is open on `path` (/proc/self/fd, proc(5)). By the file, not by
    /// the number: other suites run in this process at the same time, and the lowest free number goes to the
    /// next descriptor any of their threads opens, so a closed number may be open again on something else.
    static func isOpen(_ raw: Int32, on path: String) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(raw)")) == path
    }

    /// A file of this test's own, so no other descriptor of the process names it.
    static func uniqueFile() -> String {
        let path = NSTemporaryDirectory() + "fd-test-\(UUID().uuidString)"
        FileManager.default.createFile(atPath: path, contents: Data())
        return path
    }

    @Test func closeReleasesTheDescriptorOnce() throws {
        let path = Self.uniqueFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try FileDescriptor.open(path, O_RDONLY)
        let raw = file.rawValue
        #expect(Self.isOpen(raw, on: path))
        // O_CLOEXEC is always added.
        #expect(fcntl(raw, F_GETFD) & FD_CLOEXEC != 0)
        try file.close()
        #expect(!Self.isOpen(raw, on: path))
    }

    @Test func droppingAnOpenDescriptorClosesIt() throws {
        let path = Self.uniqueFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        var raw: Int32 = -1
        do {
            let file = try FileDescriptor.open(path, O_RDONLY)
            raw = file.rawValue
            #expect(Self.isOpen(raw, on: path))
        }
        #expect(!Self.isOpen(raw, on: path))
    }

    @Test func openFailureNamesTheCallAndPath() {
        #expect(throws: SystemError("open(/nonexistent/x)", errno: ENOENT)) {
            _ = try FileDescriptor.open("/nonexistent/x", O_RDONLY)
        }
    }

    @Test func pipeEndsAreCloseOnExecAndNonBlockingWhenAsked() throws {
        let pipe = try FileDescriptor.pipe(nonBlocking: true)
        for raw in [pipe.readEnd.rawValue, pipe.writeEnd.rawValue] {
            #expect(fcntl(raw, F_GETFD) & FD_CLOEXEC != 0)
            #expect(fcntl(raw, F_GETFL) & O_NONBLOCK != 0)
        }
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(throws: SystemError("read", errno: EAGAIN)) { _ = try pipe.readEnd.read(into: &buffer) }
        try pipe.writeEnd.writeAll([1, 2, 3])
        #expect(try pipe.readEnd.read(into: &buffer) == 3)
        #expect(buffer.prefix(3) == [1, 2, 3])

        let blocking = try FileDescriptor.pipe(nonBlocking: false)
        #expect(fcntl(blocking.readEnd.rawValue, F_GETFL) & O_NONBLOCK == 0)
    }

    /// A signal that interrupts a blocking read (handler without SA_RESTART) makes read(2) fail with EINTR:
    /// the raw call shows it (so the set-up does interrupt), `FileDescriptor.read` retries and returns the
    /// byte written after the signal.
    @Test func aReadInterruptedByASignalIsRetried() throws {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        action.sa_flags = 0  // no SA_RESTART: the kernel returns EINTR to the read
        var previous = sigaction()
        #expect(sigaction(SIGUSR2, &action, &previous) == 0)
        defer { sigaction(SIGUSR2, &previous, nil) }

        let raw = Ends(try FileDescriptor.pipe(nonBlocking: false))
        let rawRead = Self.interruptedRead(raw.writeEnd) { () -> (Int, Int32) in
            var byte: UInt8 = 0
            let result = Glibc.read(raw.readEnd, &byte, 1)
            return (result, errno)
        }
        #expect(rawRead.0 == -1 && rawRead.1 == EINTR)

        let pipe = Ends(try FileDescriptor.pipe(nonBlocking: false))
        let retried = Self.interruptedRead(pipe.writeEnd) { () -> (Int, Int32) in
            var buffer = [UInt8](repeating: 0, count: 4)
            do throws(SystemError) {
                let count = try pipe.pipe.readEnd.read(into: &buffer)
                return (count, Int32(buffer[0]))
            } catch {
                return (-1, error.errno)
            }
        }
        #expect(retried.0 == 1 && retried.1 == 42)
    }

    /// A pipe behind a reference, so a closure on another thread can borrow its ends.
    final class Ends: Sendable {
        let pipe: FileDescriptor.Pipe

        init(_ pipe: consuming FileDescriptor.Pipe) { self.pipe = pipe }

        var readEnd: Int32 { pipe.readEnd.rawValue }
        var writeEnd: Int32 { pipe.writeEnd.rawValue }
    }

    /// Runs `read` on a thread of its own, signals that thread with SIGUSR2 while it blocks, then writes the
    /// byte 42 to `writeEnd`; returns what `read` returned.
    static func interruptedRead(_ writeEnd: Int32, _ read: @escaping @Sendable () -> (Int, Int32)) -> (Int, Int32) {
        let reader = Monitor<pthread_t?>(nil)
        let result = Mutex<(Int, Int32)?>(nil)
        let done = DispatchSemaphore(value: 0)
        // The thread outlives the signalling (a signal to an ended thread is undefined).
        let release = DispatchSemaphore(value: 0)
        let thread = Thread {
            // Threads may inherit a mask that blocks the signal; this one must receive it.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            reader.update { $0 = pthread_self() }
            let value = read()
            result.withLock { $0 = value }
            done.signal()
            release.wait()
        }
        thread.start()
        // Interrupt it every 20 ms for 300 ms once it is about to read: it is blocked in read(2) for nearly all
        // of that time, so some signal lands there (a raw read then returns at once).
        guard reader.wait(until: MonotonicClock.deadline(after: 5), for: { $0 != nil }) else { return (-3, 0) }
        for _ in 0..<15 where result.withLock({ $0 }) == nil {
            if let id = reader.withLock({ $0 }) { pthread_kill(id, SIGUSR2) }
            usleep(20_000)
        }
        var byte: UInt8 = 42
        _ = Glibc.write(writeEnd, &byte, 1)
        _ = done.wait(timeout: .now() + 5)
        release.signal()
        return result.withLock { $0 } ?? (-2, 0)
    }
}
