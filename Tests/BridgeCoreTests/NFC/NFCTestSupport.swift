import BridgeTestSupport

@testable import BridgeCore

// In-memory tags and helpers for the NFC tests. Names carry an `NFC`/`Fake` prefix so they cannot
// clash with helpers of other test files in this target.

/// Fault knobs shared by the fake tags, and the log of every APDU received.
struct FakeCardFaults {
    /// 0-based index of the APDU that gets a 0-byte answer (what a real reader returns when the card
    /// leaves mid-APDU); every later APDU throws `.cardRemoved`.
    var removeAtAPDU: Int?
    /// Status words to answer instead, by 0-based APDU index.
    var statusWordAtAPDU: [Int: UInt16] = [:]
    /// 0-based index of the APDU whose transmit fails with a transport error.
    var failAtAPDU: Int?
    /// Every APDU received, in order.
    private(set) var log: [[UInt8]] = []
    private var removed = false

    /// Records `apdu`; returns an override response when a fault fires, nil to let the tag answer.
    mutating func intercept(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8]? {
        let index = log.count
        log.append(apdu)
        if removed { throw .cardRemoved }
        if removeAtAPDU == index {
            removed = true
            return []
        }
        if failAtAPDU == index { throw .failed("SCARD_E_COMM_DATA_LOST (0x8010002F)") }
        if let sw = statusWordAtAPDU[index] {
            return [UInt8(sw >> 8), UInt8(sw & 0xFF)]
        }
        return nil
    }
}

/// An NFC Forum Type 2 tag (NTAG21x-like) behind a PC/SC part 3 reader: answers `FF CA` and `FF B0`.
struct FakeType2Tag: CardTransport {
    /// The whole tag memory, page 0 upward (4 bytes a page).
    var memory: [UInt8]
    var uid: [UInt8] = [0x04, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0x80]
    /// Status word for `FF CA` (UID).
    var uidStatusWord: UInt16 = 0x9000
    /// The most data bytes one read returns (16 normally; 4 for readers that return one page).
    var maxBytesPerRead = 16
    /// Answer reads with 9000 and no data.
    var emptyReads = false
    var faults = FakeCardFaults()

    var log: [[UInt8]] { faults.log }

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        if let override = try faults.intercept(apdu) { return override }
        guard apdu.count == 5, apdu[0] == 0xFF else { return [0x6E, 0x00] }
        switch apdu[1] {
        case 0xCA:
            guard uidStatusWord == 0x9000 else { return [UInt8(uidStatusWord >> 8), UInt8(uidStatusWord & 0xFF)] }
            return uid + [0x90, 0x00]
        case 0xB0:
            let start = (Int(apdu[2]) << 8 | Int(apdu[3])) * 4
            let requested = apdu[4] == 0 ? 256 : Int(apdu[4])
            guard start < memory.count else { return [0x63, 0x00] }
            if emptyReads { return [0x90, 0x00] }
            let count = min(requested, maxBytesPerRead, memory.count - start)
            return Array(memory[start..<(start + count)]) + [0x90, 0x00]
        default:
            return [0x6A, 0x81]
        }
    }

    /// The CC-declared data area end as a byte address (page 4 start + CC[2] * 8).
    var declaredAreaEnd: Int { 16 + Int(memory.count > 14 ? memory[14] : 0) * 8 }

    /// `FF B0` reads other than the initial page-3 read that start before page 4 or end past the area.
    var readsOutsideDeclaredArea: [[UInt8]] {
        log.dropFirst().filter { apdu in
            guard apdu.count == 5, apdu[0] == 0xFF, apdu[1] == 0xB0 else { return false }
            let page = Int(apdu[2]) << 8 | Int(apdu[3])
            if page == 3 && apdu[4] == 0x10 { return false }
            return page < 4 || page * 4 + Int(apdu[4]) > declaredAreaEnd
        }
    }

    /// An NTAG213-like tag: 45 pages, CC `E1 10 12 00` (144-byte data area, pages 4-39), config pages
    /// 40-44 filled with 0xAA so a read past the area would show. `data` fills the area from page 4.
    static func ntag213(data: [UInt8]) -> FakeType2Tag {
        image(cc: [0xE1, 0x10, 0x12, 0x00], data: data, pages: 45)
    }

    /// A tag of `pages` pages with `cc` in page 3 and `data` from page 4 (zero padded, cut to fit).
    static func image(cc: [UInt8], data: [UInt8], pages: Int) -> FakeType2Tag {
        var memory = [UInt8](repeating: 0, count: pages * 4)
        // Pages 0-2 as the NTAG21x datasheet lays out the 7-byte UID the tag's FF CA answers: UID0-2 and
        // BCC0 = CT (0x88) ^ UID0 ^ UID1 ^ UID2; UID3-6; BCC1 = UID3 ^ UID4 ^ UID5 ^ UID6, internal byte, lock bytes.
        let u = FakeType2Tag(memory: []).uid
        let header: [UInt8] = [
            u[0], u[1], u[2], 0x88 ^ u[0] ^ u[1] ^ u[2], u[3], u[4], u[5], u[6], u[3] ^ u[4] ^ u[5] ^ u[6], 0x48,
            0x00, 0x00,
        ]
        memory.replaceSubrange(0..<12, with: header)
        memory.replaceSubrange(12..<16, with: cc.prefix(4))
        let areaEnd = min(16 + Int(cc.count > 2 ? cc[2] : 0) * 8, memory.count)
        let fill = Array(data.prefix(max(0, memory.count - 16)))
        memory.replaceSubrange(16..<(16 + fill.count), with: fill)
        if 16 + fill.count <= areaEnd {
            for index in areaEnd..<memory.count { memory[index] = 0xAA }
        }
        return FakeType2Tag(memory: memory)
    }
}

/// An NFC Forum Type 4 tag (ISO-DEP) answering SELECT and READ BINARY, with an optional strict MLe.
struct FakeType4Tag: CardTransport {
    var hasNDEFApplication = true
    /// Files by id (E103 is the CC).
    var files: [UInt16: [UInt8]]
    var uid: [UInt8] = [0x08, 0x12, 0x34, 0x56]
    /// Reject (6700) any READ BINARY whose Le exceeds this (the tag's MLe).
    var strictMLe: Int?
    /// The most data bytes one read returns.
    var maxBytesPerRead = 256
    /// Answer reads with 9000 and no data.
    var emptyReads = false
    var faults = FakeCardFaults()
    private var applicationSelected = false
    private var selected: UInt16?

    init(files: [UInt16: [UInt8]], strictMLe: Int? = nil) {
        self.files = files
        self.strictMLe = strictMLe
    }

    var log: [[UInt8]] { faults.log }

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        if let override = try faults.intercept(apdu) { return override }
        guard apdu.count >= 4 else { return [0x67, 0x00] }
        switch (apdu[0], apdu[1], apdu[2], apdu[3]) {
        case (0xFF, 0xCA, _, _):
            return uid + [0x90, 0x00]
        case (0x00, 0xA4, 0x04, 0x00):
            let aid: [UInt8] = [0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01]
            guard hasNDEFApplication, apdu.count >= 12, Array(apdu[5..<12]) == aid else { return [0x6A, 0x82] }
            applicationSelected = true
            selected = nil
            return [0x90, 0x00]
        case (0x00, 0xA4, 0x00, 0x0C):
            guard applicationSelected, apdu.count == 7 else { return [0x6A, 0x82] }
            let id = UInt16(apdu[5]) << 8 | UInt16(apdu[6])
            guard files[id] != nil else { return [0x6A, 0x82] }
            selected = id
            return [0x90, 0x00]
        case (0x00, 0xB0, _, _):
            guard apdu.count == 5, let id = selected, let file = files[id] else { return [0x69, 0x86] }
            let offset = Int(apdu[2]) << 8 | Int(apdu[3])
            let requested = apdu[4] == 0 ? 256 : Int(apdu[4])
            if let mle = strictMLe, requested > mle { return [0x67, 0x00] }
            guard offset < file.count else { return [0x6B, 0x00] }
            if emptyReads { return [0x90, 0x00] }
            let count = min(requested, maxBytesPerRead, file.count - offset)
            return Array(file[offset..<(offset + count)]) + [0x90, 0x00]
        default:
            return [0x6D, 0x00]
        }
    }

    /// A 15-byte CC (mapping 2.0 by default).
    static func capabilityContainer(
        version: UInt8 = 0x20, mle: Int = 0x3B, mlc: Int = 0x34,
        fileID: UInt16 = 0xE104, maxSize: Int = 0x0800, readAccess: UInt8 = 0x00,
        tlvTag: UInt8 = 0x04
    ) -> [UInt8] {
        [
            0x00, 0x0F, version, UInt8(mle >> 8), UInt8(mle & 0xFF), UInt8(mlc >> 8), UInt8(mlc & 0xFF),
            tlvTag, 0x06, UInt8(fileID >> 8), UInt8(fileID & 0xFF), UInt8(maxSize >> 8), UInt8(maxSize & 0xFF),
            readAccess, 0x00,
        ]
    }

    /// A tag holding `message` (NLEN = its length unless `nlen` is given) in NDEF file E104.
    static func tag(
        message: [UInt8], nlen: Int? = nil, mle: Int = 0x3B, maxSize: Int = 0x0800,
        strict: Bool = true
    ) -> FakeType4Tag {
        let length = nlen ?? message.count
        var file = [UInt8(length >> 8), UInt8(length & 0xFF)] + message
        if file.count < maxSize { file += [UInt8](repeating: 0, count: maxSize - file.count) }
        return FakeType4Tag(
            files: [0xE103: capabilityContainer(mle: mle, maxSize: maxSize), 0xE104: file],
            strictMLe: strict ? mle : nil)
    }
}

/// A transport that answers every APDU with seeded random bytes (often ending in 9000).
struct RandomCardTransport: CardTransport {
    var rng: SeededRandom
    var count = 0

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        count += 1
        let roll = rng.next() % 20
        if roll == 0 { throw .failed("random failure") }
        if roll == 1 { return [] }
        let length = Int(rng.next() % 40)
        var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        if roll < 15 { bytes += [0x90, 0x00] }
        return bytes
    }
}

/// Wraps an NDEF message in a Type 2 NDEF TLV (1- or 3-byte length) followed by the terminator TLV.
func nfcNDEFTLV(_ message: [UInt8]) -> [UInt8] {
    let length: [UInt8] =
        message.count < 0xFF
        ? [UInt8(message.count)]
        : [0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)]
    return [0x03] + length + message + [0xFE]
}

/// Runs a tag read and returns its error, or nil when it succeeded.
func nfcReadError(_ body: () throws(TagReadError) -> TagReadResult) -> TagReadError? {
    do throws(TagReadError) {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// Reads the tag behind `transport` and returns the error, or nil when the read succeeded.
func nfcReadError(
    atr: [UInt8], _ transport: inout some CardTransport,
    options: TagReadOptions = TagReadOptions()
) -> TagReadError? {
    do throws(TagReadError) {
        _ = try TagReader.read(atr: atr, transport: &transport, options: options)
        return nil
    } catch {
        return error
    }
}

/// Runs an NDEF parse and returns its error, or nil when it succeeded.
func nfcParseError(_ bytes: [UInt8]) -> NDEFError? {
    do throws(NDEFError) {
        _ = try NDEFParser.parseMessage(bytes)
        return nil
    } catch {
        return error
    }
}

/// The typical Plings URL used across the tests.
let nfcPlingsURL = "https://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"

/// The ATR an ACR122U gives an NTAG21x / MIFARE Ultralight.
let nfcUltralightATR: [UInt8] = [
    0x3B, 0x8F, 0x80, 0x01, 0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06,
    0x03, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x68,
]
