/// Cuts the byte stream of a serial scanner into codes: pure logic, no I/O (the reader feeds it what `read` gave
/// and the time). Bytes are kept exactly as sent (a GS 0x1D inside a GS1 code stays), except the frame bytes.
///
/// - A code ends at the configured suffix: CR (0x0D), LF (0x0A), CR LF, ETX (0x03) or Tab (0x09). A scanner set to
///   CR LF while the configuration says `cr` or `lf` still gives clean codes: the LF after a CR, or the CR before
///   an LF, is part of the suffix.
/// - With a prefix (STX 0x02), a code starts after it; bytes outside STX...suffix are discarded as noise.
/// - With `suffix: none`, a gap of `interByteTimeout` seconds after the last byte ends the code. With a suffix, a
///   code left unfinished that long is discarded (a half scan, a pulled cable).
/// - A code longer than `maxLength` is discarded, and so is the rest of it up to its suffix.
public struct SerialFramer {
    /// What ends one code.
    public enum Suffix: String, Sendable, CaseIterable, SendableMetatype {
        case cr
        case lf
        case crlf
        case etx
        case tab
        case none
    }

    /// Why bytes were dropped.
    public enum DiscardReason: Sendable, Equatable {
        /// More than `maxLength` bytes before the suffix.
        case overlong(limit: Int)
        /// No suffix within `interByteTimeout` of the last byte.
        case unfinished(bytes: Int)
        /// Bytes outside a prefix ... suffix frame.
        case outsideFrame(bytes: Int)
    }

    public enum Output: Sendable, Equatable {
        case code([UInt8])
        case discarded(DiscardReason)
    }

    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A

    private let suffix: Suffix
    private let prefix: UInt8?
    private let maxLength: Int
    private let interByteTimeout: Double
    private var code: [UInt8] = []
    /// Inside a prefix ... suffix frame (always true without a prefix).
    private var framed: Bool
    /// Swallowing the rest of an overlong code.
    private var overlong = false
    /// The last byte ended a code with CR: an LF right after it belongs to that suffix.
    private var afterCR = false
    /// Bytes seen outside a frame since the last report.
    private var noise = 0
    /// When the last byte arrived (monotonic seconds), while a code is unfinished.
    private var lastByte: Double?

    public init(suffix: Suffix, prefix: UInt8? = nil, maxLength: Int, interByteTimeout: Double) {
        self.suffix = suffix
        self.prefix = prefix
        self.maxLength = max(1, maxLength)
        self.interByteTimeout = interByteTimeout
        framed = prefix == nil
    }

    /// Feeds the bytes one `read` returned at monotonic time `now`; `emit` gets each code and each discard.
    public mutating func feed(_ bytes: some Sequence<UInt8>, now: Double, emit: (Output) -> Void) {
        if let output = tick(now: now) { emit(output) }
        for byte in bytes { take(byte, emit: emit) }
        reportNoise(emit)
        // Something is pending while a code has begun: bytes, the rest of an overlong one, or a prefix.
        let pending = !code.isEmpty || overlong || (prefix != nil && framed)
        lastByte = pending ? now : nil
    }

    /// When the unfinished code expires (monotonic seconds), or nil when nothing is pending.
    public func pendingDeadline() -> Double? { lastByte.map { $0 + interByteTimeout } }

    /// Ends (`suffix: none`) or discards the unfinished code whose time has passed.
    public mutating func tick(now: Double) -> Output? {
        guard let last = lastByte, now >= last + interByteTimeout else { return nil }
        lastByte = nil
        let pending = code
        let wasOverlong = overlong
        reset()
        // An overlong code was reported when it passed the limit.
        guard !wasOverlong, !pending.isEmpty else { return nil }
        return suffix == .none ? .code(pending) : .discarded(.unfinished(bytes: pending.count))
    }

    private mutating func reset() {
        code.removeAll(keepingCapacity: true)
        overlong = false
        framed = prefix == nil
    }

    private mutating func take(_ byte: UInt8, emit: (Output) -> Void) {
        let wasAfterCR = afterCR
        afterCR = false
        // A scanner sending CR LF to a `cr` configuration: the LF belongs to the suffix just seen.
        if wasAfterCR, byte == SerialFramer.lf { return }
        if let prefix, byte == prefix {
            // A new frame. One still open lost its suffix: say so rather than glue two codes together.
            if framed, !code.isEmpty, !overlong { emit(.discarded(.unfinished(bytes: code.count))) }
            reportNoise(emit)
            reset()
            framed = true
            return
        }
        if ends(with: byte) {
            if framed, !overlong, !code.isEmpty { emit(.code(code)) }
            reportNoise(emit)
            reset()
            afterCR = suffix == .cr && byte == SerialFramer.cr
            return
        }
        guard framed else {
            noise += 1
            return
        }
        if overlong { return }
        code.append(byte)
        if code.count > maxLength {
            emit(.discarded(.overlong(limit: maxLength)))
            code.removeAll(keepingCapacity: true)
            overlong = true
        }
    }

    /// True when `byte` ends a code under the configured suffix. For `lf` and `crlf` an LF ends it, and a CR just
    /// before it is part of the suffix (dropped).
    private mutating func ends(with byte: UInt8) -> Bool {
        switch suffix {
        case .cr: return byte == SerialFramer.cr
        case .lf, .crlf:
            guard byte == SerialFramer.lf else { return false }
            if code.last == SerialFramer.cr { code.removeLast() }
            return true
        case .etx: return byte == 0x03
        case .tab: return byte == 0x09
        case .none: return false
        }
    }

    private mutating func reportNoise(_ emit: (Output) -> Void) {
        guard noise > 0 else { return }
        emit(.discarded(.outsideFrame(bytes: noise)))
        noise = 0
    }
}
