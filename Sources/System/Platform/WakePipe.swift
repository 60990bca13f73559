/// A non-blocking pipe whose only job is to wake a `poll()`: a byte written makes its read end readable.
public final class WakePipe: Sendable {
    private let pipe: FileDescriptor.Pipe

    public init?() {
        guard let pipe = try? FileDescriptor.pipe(nonBlocking: true) else { return nil }
        self.pipe = pipe
    }

    /// The end that goes into the `poll()` set.
    public var readFD: Int32 { pipe.readEnd.rawValue }

    public func signal() {
        // EAGAIN means the pipe is full: a wake-up is pending already.
        _ = try? withUnsafeBytes(of: UInt8(1)) { (byte) throws(SystemError) in try pipe.writeEnd.write(byte) }
    }

    /// Empties the pipe, so the next `poll()` sleeps again.
    public func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while (try? pipe.readEnd.read(into: &bytes)) ?? 0 > 0 {}
    }
}
