/// One Linux `struct input_event` as read from an evdev node.
///
/// Layout on x86_64 and aarch64 (the only targets): `struct timeval` (two 64-bit longs: seconds,
/// microseconds), `__u16 type`, `__u16 code`, `__s32 value`; 24 bytes, little-endian. 32-bit ABIs
/// (16-byte records) are not supported.
public struct InputEvent: Sendable, Equatable, Hashable {
    /// Size in bytes of one encoded record.
    public static let size = 24

    public var seconds: Int64
    public var microseconds: Int64
    public var type: UInt16
    public var code: UInt16
    public var value: Int32

    public init(seconds: Int64 = 0, microseconds: Int64 = 0, type: UInt16, code: UInt16, value: Int32) {
        self.seconds = seconds
        self.microseconds = microseconds
        self.type = type
        self.code = code
        self.value = value
    }

    /// The event timestamp in seconds (whatever clock the node uses: realtime unless `EVIOCSCLOCKID`).
    public var time: Double {
        Double(seconds) + Double(microseconds) / 1_000_000
    }

    /// Decodes the record starting at `offset`, or nil when fewer than `size` bytes remain there.
    public init?(bytes: UnsafeRawBufferPointer, offset: Int) {
        guard offset >= 0, offset <= bytes.count, bytes.count - offset >= Self.size else { return nil }
        self = Self.decodeUnchecked(bytes, offset)
    }

    /// Decodes without the bounds check; callers must have checked `bytes.count - offset >= size`.
    @inline(__always)
    static func decodeUnchecked(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> InputEvent {
        InputEvent(
            seconds: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int64.self)),
            microseconds: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: Int64.self)),
            type: UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt16.self)),
            code: UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 18, as: UInt16.self)),
            value: Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 20, as: Int32.self)))
    }

    /// Appends the 24-byte little-endian encoding (for tests, generators and pipes).
    public func encode(into bytes: inout [UInt8]) {
        Self.append(UInt64(bitPattern: seconds), width: 8, to: &bytes)
        Self.append(UInt64(bitPattern: microseconds), width: 8, to: &bytes)
        Self.append(UInt64(type), width: 2, to: &bytes)
        Self.append(UInt64(code), width: 2, to: &bytes)
        Self.append(UInt64(UInt32(bitPattern: value)), width: 4, to: &bytes)
    }

    /// The 24-byte encoding of this event.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.size)
        encode(into: &bytes)
        return bytes
    }

    /// The concatenated encoding of `events`, as a `read(2)` of the node would return them.
    public static func encode(_ events: some Sequence<InputEvent>) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(events.underestimatedCount * size)
        for event in events {
            event.encode(into: &bytes)
        }
        return bytes
    }

    private static func append(_ value: UInt64, width: Int, to bytes: inout [UInt8]) {
        var rest = value
        for _ in 0..<width {
            bytes.append(UInt8(truncatingIfNeeded: rest))
            rest >>= 8
        }
    }
}
