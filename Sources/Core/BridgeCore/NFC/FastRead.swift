/// NTAG21x FAST_READ (`3A start end`, NXP NTAG213/215/216 datasheet) carried through a reader's pass-through:
/// the command builders and the reply parsers, with every length checked against the bytes present.
///
/// A reply that is not exactly what was asked for (another status, a short or long data field, a missing TLV) is
/// a `FastReadFailure`: the caller falls back to READ BINARY, so a bad pass-through reply never becomes a URL.
public enum FastRead {
    /// The most pages one FAST_READ asks for through `method`: a PN533 frame carries 262 bytes, and the
    /// ACR122U answer (`D5 43 00` + data + SW) must fit a short APDU response, so 60 pages (240 bytes); the Part 3
    /// answer adds its TLVs around the data, so 48 pages (192 bytes) stay well inside any reader's buffer.
    public static func maxPages(_ method: ReaderProfile.FastRead) -> Int {
        method == .inCommunicateThru ? 60 : 48
    }

    /// The last page of the smallest NTAG21x (NTAG213: pages 0x00-0x2C). A first FAST_READ that ends here never
    /// addresses a page an NTAG lacks.
    public static let smallestLastPage = 0x2C

    /// The tag command `3A start end`.
    public static func tagCommand(start: Int, end: Int) -> [UInt8] {
        [0x3A, UInt8(truncatingIfNeeded: start), UInt8(truncatingIfNeeded: end)]
    }

    /// ACR122U direct transmit of PN533 InCommunicateThru: `FF 00 00 00 Lc D4 42 <tag command>`.
    public static func inCommunicateThru(_ tagCommand: [UInt8]) -> [UInt8] {
        [0xFF, 0x00, 0x00, 0x00, UInt8(2 + tagCommand.count), 0xD4, 0x42] + tagCommand
    }

    /// PC/SC Part 3 "Manage Session / Start Transparent Session": `FF C2 00 00 02 81 00`.
    public static let startSession: [UInt8] = [0xFF, 0xC2, 0x00, 0x00, 0x02, 0x81, 0x00]
    /// "Manage Session / End Transparent Session": `FF C2 00 00 02 82 00`.
    public static let endSession: [UInt8] = [0xFF, 0xC2, 0x00, 0x00, 0x02, 0x82, 0x00]

    /// "Transparent Exchange" with a Transceive data object: `FF C2 00 01 Lc 95 L <tag command>`.
    public static func transceive(_ tagCommand: [UInt8]) -> [UInt8] {
        [0xFF, 0xC2, 0x00, 0x01, UInt8(2 + tagCommand.count), 0x95, UInt8(tagCommand.count)] + tagCommand
    }

    /// Why a fast-read exchange is not usable. `readerRefused` marks answers that say the reader does not do
    /// this at all (an error status word to the wrapper itself), as opposed to a bad reply to one read.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public var readerRefused: Bool

        public init(_ reason: String, readerRefused: Bool = false) {
            self.reason = reason
            self.readerRefused = readerRefused
        }

        public var description: String { reason }
    }

    /// The data of an InCommunicateThru reply `D5 43 <status> <data> 90 00`, which must be exactly `expected` bytes.
    public static func parseInCommunicateThru(_ raw: [UInt8], expected: Int) -> Result<[UInt8], Failure> {
        guard let response = APDUResponse(raw: raw) else { return .failure(Failure("reply shorter than SW1 SW2")) }
        guard response.isSuccess else {
            return .failure(
                Failure("reader answered \(NFCHex.word(response.statusWord)) to the pass-through", readerRefused: true))
        }
        let data = response.data
        guard data.count >= 3, data[0] == 0xD5, data[1] == 0x43 else {
            return .failure(Failure("not an InCommunicateThru answer (\(NFCHex.bytes(data.prefix(3))))"))
        }
        guard data[2] == 0x00 else { return .failure(Failure("PN533 status \(NFCHex.byte(data[2]))")) }
        guard data.count - 3 == expected else {
            return .failure(Failure("FAST_READ returned \(data.count - 3) bytes, asked for \(expected)"))
        }
        return .success(Array(data[3...]))
    }

    /// Checks a Part 3 "Manage Session" answer: SW 9000 and a `C0 03 00 90 00` generic status object.
    public static func parseSessionReply(_ raw: [UInt8]) -> Result<Void, Failure> {
        switch parseTransparentReply(raw) {
        case .success: return .success(())
        case .failure(let failure): return .failure(failure)
        }
    }

    /// The data of a Part 3 "Transparent Exchange" answer: BER-TLV objects with `C0 03 00 90 00` (generic
    /// status) and `97 L <data>` (response data, exactly `expected` bytes), then SW 9000. Other objects (92, 96,
    /// ...) are skipped by their length.
    public static func parseTransceiveReply(_ raw: [UInt8], expected: Int) -> Result<[UInt8], Failure> {
        switch parseTransparentReply(raw) {
        case .failure(let failure): return .failure(failure)
        case .success(let data):
            guard let data else { return .failure(Failure("no response data object (97)")) }
            guard data.count == expected else {
                return .failure(Failure("FAST_READ returned \(data.count) bytes, asked for \(expected)"))
            }
            return .success(data)
        }
    }

    /// Walks the TLVs of a Part 3 answer; the 97 value if present. Every length is checked before use.
    static func parseTransparentReply(_ raw: [UInt8]) -> Result<[UInt8]?, Failure> {
        guard let response = APDUResponse(raw: raw) else { return .failure(Failure("reply shorter than SW1 SW2")) }
        guard response.isSuccess else {
            return .failure(
                Failure("reader answered \(NFCHex.word(response.statusWord)) to FF C2", readerRefused: true))
        }
        let bytes = response.data
        var index = 0
        var status: [UInt8]?
        var data: [UInt8]?
        while index < bytes.count {
            let tag = bytes[index]
            index += 1
            if tag & 0x1F == 0x1F {
                // A multi-byte BER tag (e.g. 5F 46): its later bytes have bit 8 set until the last one.
                while index < bytes.count && bytes[index] & 0x80 != 0 { index += 1 }
                index += 1
            }
            guard index < bytes.count else { return .failure(Failure("TLV \(NFCHex.byte(tag)) has no length")) }
            var length = Int(bytes[index])
            index += 1
            if length == 0x81 || length == 0x82 {
                let size = length - 0x80
                guard index + size <= bytes.count else { return .failure(Failure("TLV length cut short")) }
                length = bytes[index..<(index + size)].reduce(0) { $0 << 8 | Int($1) }
                index += size
            } else if length > 0x7F {
                return .failure(Failure("TLV length form \(NFCHex.byte(UInt8(length))) not supported"))
            }
            guard length <= bytes.count - index else {
                return .failure(
                    Failure("TLV \(NFCHex.byte(tag)) declares \(length) bytes, \(bytes.count - index) left"))
            }
            let value = Array(bytes[index..<(index + length)])
            index += length
            switch tag {
            case 0xC0: status = value
            case 0x97: data = value
            default: break
            }
        }
        guard let status else { return .failure(Failure("no generic status object (C0)")) }
        guard status == [0x00, 0x90, 0x00] else {
            // 6A81 in C0: the reader does not support the data object: transparent sessions are not for it.
            let notSupported = status.count == 3 && status[1] == 0x6A && status[2] == 0x81
            return .failure(Failure("status object \(NFCHex.bytes(status))", readerRefused: notSupported))
        }
        return .success(data)
    }
}

/// How a read used the fast path (for `test-read`, the log and the benchmark).
public enum FastReadUse: Sendable, Equatable {
    /// Not tried (no fast read for this reader or tag kind, or the reader refused it before).
    case notTried
    /// The whole read went through FAST_READ.
    case used
    /// FAST_READ was tried and the read fell back to READ BINARY; the reason, and whether the reader refused
    /// the pass-through itself (then it is not tried again on that reader).
    case fellBack(reason: String, readerRefused: Bool)
}

extension FastReadUse {
    /// `notTried`, `used` or `fellBack`, for JSON output.
    public var code: String {
        switch self {
        case .notTried: return "notTried"
        case .used: return "used"
        case .fellBack: return "fellBack"
        }
    }

    /// Why the fast read fell back, if it did.
    public var fallbackReason: String? {
        if case .fellBack(let reason, _) = self { return reason }
        return nil
    }
}
