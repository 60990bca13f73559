import CSysShim
import Glibc

/// An open file descriptor this process owns (modelled on swift-system's `FileDescriptor`, but an owner):
/// noncopyable, so exactly one value holds it and it is closed exactly once, by `close()` or, when the value
/// is dropped still open, by its deinit. A double close (which on a busy process closes someone else's newly
/// opened descriptor) cannot be written; nor can a `-1` sentinel: a descriptor that may be absent is an
/// optional.
///
/// Every call goes through `systemCall`, so `EINTR` is retried and a failure names its call. `close` is the
/// exception, as in swift-system: on Linux the descriptor is released even when close(2) reports `EINTR`, so
/// retrying could close a descriptor another thread has just been given.
public struct FileDescriptor: ~Copyable, Sendable {
    /// The kernel's number for it; valid while this value lives. Pass it to C calls; never close it.
    public let rawValue: Int32

    /// Takes ownership of `rawValue` (an open descriptor, e.g. from a C library or a test's pipe).
    public init(adopting rawValue: Int32) {
        precondition(rawValue >= 0, "FileDescriptor(adopting:) needs an open descriptor, got \(rawValue)")
        self.rawValue = rawValue
    }

    deinit { _ = Glibc.close(rawValue) }

    /// Opens `path` with `flags` (`O_CLOEXEC` is always added: no child process inherits it) and, when
    /// `O_CREAT` is among them, `mode`.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemError) -> FileDescriptor {
        let raw = try systemCall("open(\(path))") { Glibc.open(path, flags | O_CLOEXEC, mode) }
        return FileDescriptor(adopting: raw)
    }

    /// A pipe whose ends are close-on-exec from the start (pipe2(2): no window in which another thread's
    /// fork/exec inherits them), non-blocking when `nonBlocking`.
    public static func pipe(nonBlocking: Bool) throws(SystemError) -> Pipe {
        var fds: [Int32] = [0, 0]
        try systemCall("pipe2") { plings_pipe2(&fds, O_CLOEXEC | (nonBlocking ? O_NONBLOCK : 0)) }
        return Pipe(readEnd: FileDescriptor(adopting: fds[0]), writeEnd: FileDescriptor(adopting: fds[1]))
    }

    /// Closes it now, reporting the error close(2) gives (the descriptor is released either way).
    public consuming func close() throws(SystemError) {
        let raw = rawValue
        discard self
        if Glibc.close(raw) == -1 { throw SystemError("close", errno: Glibc.errno) }
    }

    /// Reads up to `bytes.count` bytes into the start of `bytes`; 0 is end of file.
    public func read(into bytes: inout [UInt8], call: String = "read") throws(SystemError) -> Int {
        try systemCall(call) { bytes.withUnsafeMutableBytes { Glibc.read(rawValue, $0.baseAddress, $0.count) } }
    }

    /// Writes up to `buffer.count` bytes; returns how many were written.
    public func write(_ buffer: UnsafeRawBufferPointer, call: String = "write") throws(SystemError) -> Int {
        try systemCall(call) { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Writes every byte, resuming after short writes.
    public func writeAll(_ bytes: [UInt8], call: String = "write") throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let start = offset
            offset += try systemCall(call) {
                bytes.withUnsafeBytes { buffer in
                    buffer.baseAddress.map { Glibc.write(rawValue, $0 + start, buffer.count - start) } ?? 0
                }
            }
        }
    }
}

extension FileDescriptor {
    /// The two ends of a pipe, each owned on its own.
    public struct Pipe: ~Copyable, Sendable {
        public var readEnd: FileDescriptor
        public var writeEnd: FileDescriptor
    }
}
