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
/// Every blocking or fallible libc call in this module goes through here, so interrupted calls are
/// never mistaken for failures and every failure names its call.
@discardableResult
func systemCall<T: BinaryInteger>(_ name: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemError(name, errno: code)
    }
}

/// Monotonic seconds (CLOCK_MONOTONIC): the decoder's clock and the poll deadlines.
enum Monotonic {
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
