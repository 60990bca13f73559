import Glibc

/// A failed libc call: its name and `errno`.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    /// The call that failed (`open`, `ioctl(EVIOCGRAB)`, `poll`...).
    public var call: String
    public var errno: Int32

    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(call): \(String(cString: strerror(errno))) (errno \(errno))"
    }
}

/// Runs a libc call that reports failure as -1 with `errno`, retrying on `EINTR`.
///
/// Every fallible libc call goes through here, so an interrupted call is never mistaken for a failure and
/// every failure names its call (the shape of swift-system's `valueOrErrno` and swift-nio's `syscall`).
@discardableResult
public func systemCall<T: BinaryInteger>(_ name: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemError(name, errno: code)
    }
}
