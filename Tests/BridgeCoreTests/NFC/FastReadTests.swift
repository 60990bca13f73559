import BridgeTestSupport
import Testing

@testable import BridgeCore

// Expected commands come from the ACR122U API manual (direct transmit FF 00 00 00 Lc + PN533 InCommunicateThru
// D4 42, answer D5 43 status data), PC/SC Part 3 (FF C2 00 00 02 81 00 / 82 00 sessions, FF C2 00 01 with the
// 95 transceive object, answers C0 03 00 90 00 and 97) and the NTAG213/215/216 datasheet (FAST_READ 3A start
// end; NTAG213 pages 00-2C, data area pages 04-27; NAK for pages the tag lacks; no roll-over).

/// A Type 2 tag behind a reader that also passes raw tag commands through, ACR122U- or Part 3-style.
struct FakePassThroughTag: CardTransport {
    enum Style { case acr122u, part3, refusing }
    var tag: FakeType2Tag
    var style: Style
    /// Rewrites the raw pass-through answer (truncation, garbage) before it is returned.
    var corrupt: (([UInt8]) -> [UInt8])?
    var inSession = false
    private(set) var log: [[UInt8]] = []

    init(_ tag: FakeType2Tag, style: Style, corrupt: (([UInt8]) -> [UInt8])? = nil) {
        self.tag = tag
        self.style = style
        self.corrupt = corrupt
    }

    /// FAST_READ on the tag memory: nil (a NAK) for a page the tag lacks or end < start.
    func fastRead(_ command: [UInt8]) -> [UInt8]? {
        guard command.count == 3, command[0] == 0x3A else { return nil }
        let pages = tag.memory.count / 4
        let (start, end) = (Int(command[1]), Int(command[2]))
        guard start <= end, end < pages else { return nil }
        return Array(tag.memory[(start * 4)..<((end + 1) * 4)])
    }

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        log.append(apdu)
        switch (style, Array(apdu.prefix(2))) {
        case (.acr122u, [0xFF, 0x00]) where apdu.count > 7 && Array(apdu[5..<7]) == [0xD4, 0x42]:
            guard let data = fastRead(Array(apdu[7...])) else { return [0xD5, 0x43, 0x01, 0x90, 0x00] }
            let reply = [0xD5, 0x43, 0x00] + data + [0x90, 0x00]
            return corrupt?(reply) ?? reply
        case (.part3, [0xFF, 0xC2]):
            let ok: [UInt8] = [0xC0, 0x03, 0x00, 0x90, 0x00]
            if apdu == FastRead.startSession {
                inSession = true
                return ok + [0x90, 0x00]
            }
            if apdu == FastRead.endSession {
                inSession = false
                return ok + [0x90, 0x00]
            }
            guard inSession, apdu.count > 7, apdu[5] == 0x95 else { return [0xC0, 0x03, 0x01, 0x6A, 0x81, 0x90, 0x00] }
            guard let data = fastRead(Array(apdu[7...])) else { return [0xC0, 0x03, 0x01, 0x64, 0x01, 0x90, 0x00] }
            let length: [UInt8] = data.count < 0x80 ? [UInt8(data.count)] : [0x81, UInt8(data.count)]
            let reply = ok + [0x92, 0x01, 0x00, 0x97] + length + data + [0x90, 0x00]
            return corrupt?(reply) ?? reply
        default:
            return try tag.transmit(apdu)
        }
    }
}

@Suite struct FastReadTests {
    static let plingsURL = "https://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"

    static func tlv(_ message: [UInt8]) -> [UInt8] {
        message.count < 0xFF
            ? [0x03, UInt8(message.count)] + message + [0xFE]
            : [0x03, 0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message + [0xFE]
    }

    static func uriRecord(_ uri: String) -> [UInt8] {
        let payload = NDEFURI.encodePayload(uri)
        if payload.count < 256 { return [0xD1, 0x01, UInt8(payload.count), 0x55] + payload }
        let n = payload.count
        return [0xC1, 0x01, UInt8(n >> 24 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), 0x55]
            + payload
    }

    static func read(_ transport: inout FakePassThroughTag, _ method: ReaderProfile.FastRead) throws -> TagReadResult {
        try TagReader.read(
            kind: .type2(name: "NTAG"), transport: &transport, options: TagReadOptions(fastRead: method))
    }

    @Test("ACR122U: a Plings URL on an NTAG213 is one FAST_READ of pages 00-27, the UID from pages 0-2")
    func acr122uNTAG213() throws {
        var tag = FakePassThroughTag(.ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .acr122u)
        let result = try Self.read(&tag, .inCommunicateThru)
        #expect(result.uri == Self.plingsURL)
        #expect(result.fastRead == .used)
        #expect(result.apduCount == 1)
        #expect(tag.log == [[0xFF, 0x00, 0x00, 0x00, 0x05, 0xD4, 0x42, 0x3A, 0x00, 0x27]])
        // The UID is exactly what the reader's GET UID gives for the same tag.
        var plain = FakePassThroughTag(.ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .refusing)
        let viaGetUID = try TagReader.read(kind: .type2(name: "NTAG"), transport: &plain)
        #expect(plain.log.first == [0xFF, 0xCA, 0x00, 0x00, 0x00])
        #expect(result.uid == viaGetUID.uid && result.uid == [0x04, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0x80])
    }

    @Test("pages 0-2 whose check bytes are wrong are not a UID: GET UID and READ BINARY instead")
    func badCheckBytesFallBack() throws {
        var image = FakeType2Tag.ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL)))
        image.memory[3] ^= 0x01  // BCC0
        var tag = FakePassThroughTag(image, style: .acr122u)
        let result = try Self.read(&tag, .inCommunicateThru)
        #expect(result.uri == Self.plingsURL)
        #expect(result.uid == [0x04, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0x80])
        guard case .fellBack(let reason, false) = result.fastRead else {
            Issue.record("\(String(describing: result.fastRead))")
            return
        }
        #expect(reason.contains("no NTAG21x UID"))
        #expect(tag.log.contains([0xFF, 0xCA, 0x00, 0x00, 0x00]))
    }

    @Test("Part 3: start session, one transparent exchange with a 95 object, end session; 97 with an 81 length")
    func part3NTAG213() throws {
        var tag = FakePassThroughTag(.ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .part3)
        let result = try Self.read(&tag, .transparentSession)
        #expect(result.uri == Self.plingsURL)
        #expect(result.fastRead == .used)
        #expect(
            tag.log == [
                [0xFF, 0xC2, 0x00, 0x00, 0x02, 0x81, 0x00],
                [0xFF, 0xC2, 0x00, 0x01, 0x05, 0x95, 0x03, 0x3A, 0x00, 0x27],
                [0xFF, 0xC2, 0x00, 0x00, 0x02, 0x82, 0x00],
            ])
    }

    @Test("a long message on an NTAG215 continues from page 0x28, in frames of at most 60 pages, inside the area")
    func longMessageNTAG215() throws {
        let url = Self.plingsURL + "&x=" + String(repeating: "a", count: 300)
        let image = Self.tlv(Self.uriRecord(url))
        var tag = FakePassThroughTag(
            .image(cc: [0xE1, 0x10, 0x3E, 0x00], data: image, pages: 135), style: .acr122u)
        let result = try Self.read(&tag, .inCommunicateThru)
        #expect(result.uri == url)
        #expect(result.fastRead == .used)
        let fastReads = tag.log.filter { $0.count == 10 && $0[5] == 0xD4 }.map { Array($0[7...]) }
        // Area: 496 bytes = pages 04-7F; the message ends near byte 370: 0x28 + 60 pages - 1 = 0x63 covers it.
        #expect(image.count > 144 + 4 && image.count <= 144 + 240)
        #expect(fastReads == [[0x3A, 0x00, 0x27], [0x3A, 0x28, 0x63]])
        var plain = FakePassThroughTag(
            .image(cc: [0xE1, 0x10, 0x3E, 0x00], data: image, pages: 135), style: .refusing)
        #expect(try TagReader.read(kind: .type2(name: "NTAG"), transport: &plain).uri == url)
    }

    @Test("a reader that refuses the pass-through falls back to READ BINARY and says the reader refused")
    func refusedFallsBack() throws {
        var tag = FakePassThroughTag(.ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .refusing)
        let result = try Self.read(&tag, .inCommunicateThru)
        #expect(result.uri == Self.plingsURL)
        #expect(
            result.fastRead
                == .fellBack(
                    reason: "FAST_READ pages 0-39: reader answered 6E00 to the pass-through", readerRefused: true))
        #expect(result.apduCount == 1 + 1 + 4)  // the refused FAST_READ, GET UID, then READ BINARY's 4 reads
        var part3 = FakePassThroughTag(.ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .refusing)
        let viaPart3 = try Self.read(&part3, .transparentSession)
        #expect(viaPart3.uri == Self.plingsURL)
        if case .fellBack(_, let refused) = viaPart3.fastRead { #expect(refused) } else { Issue.record("no fallback") }
    }

    @Test("a tag smaller than NTAG213 NAKs the first FAST_READ: READ BINARY, the reader not blamed")
    func smallTagNAK() throws {
        // MIFARE Ultralight EV1 MF0UL11: 20 pages, 48-byte area.
        var tag = FakePassThroughTag(
            .image(
                cc: [0xE1, 0x10, 0x06, 0x00], data: Self.tlv(Self.uriRecord("https://s.plings.io/?t=n")), pages: 20),
            style: .acr122u)
        let result = try Self.read(&tag, .inCommunicateThru)
        #expect(result.uri == "https://s.plings.io/?t=n")
        #expect(result.fastRead == .fellBack(reason: "FAST_READ pages 0-39: PN533 status 01", readerRefused: false))
    }

    @Test("truncated, lengthened and garbled pass-through replies never change the URL")
    func badRepliesFallBack() throws {
        let corruptions: [(String, ([UInt8]) -> [UInt8])] = [
            ("cut by 5", { Array($0.dropLast(7)) + [0x90, 0x00] }),
            ("one byte more", { Array($0.dropLast(2)) + [0x00, 0x90, 0x00] }),
            ("only SW", { _ in [0x90, 0x00] }),
            ("wrong header", { [0xD5, 0x41] + $0.dropFirst(2) }),
            ("status byte", { [0xD5, 0x43, 0x14] + $0.dropFirst(3) }),
            ("error SW", { Array($0.dropLast(2)) + [0x63, 0x00] }),
        ]
        for (name, corrupt) in corruptions {
            var tag = FakePassThroughTag(
                .ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .acr122u, corrupt: corrupt)
            let result = try Self.read(&tag, .inCommunicateThru)
            #expect(result.uri == Self.plingsURL, "\(name)")
            if case .fellBack = result.fastRead {} else { Issue.record("\(name): \(result.fastRead)") }
        }
        let part3Corruptions: [(String, ([UInt8]) -> [UInt8])] = [
            ("97 declares more than follows", { Array($0.dropLast(7)) + [0x90, 0x00] }),
            ("97 long form 82 FF FF", { Array($0.prefix(8)) + [0x97, 0x82, 0xFF, 0xFF, 0x01, 0x90, 0x00] }),
            ("no C0", { Array($0.dropFirst(5)) }),
            ("C0 error", { [0xC0, 0x03, 0x01, 0x64, 0x01] + $0.dropFirst(5) }),
            ("length byte only", { _ in [0xC0, 0x90, 0x00] }),
            ("bad length form", { [0xC0, 0x85] + $0 }),
        ]
        for (name, corrupt) in part3Corruptions {
            var tag = FakePassThroughTag(
                .ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: .part3, corrupt: corrupt)
            let result = try Self.read(&tag, .transparentSession)
            #expect(result.uri == Self.plingsURL, "\(name)")
            let end = tag.log.firstIndex(of: FastRead.endSession)
            let readBinary = tag.log.firstIndex(of: [0xFF, 0xB0, 0x00, 0x03, 0x10])
            #expect(end != nil && readBinary != nil && end! < readBinary!, "\(name): session ended before READ BINARY")
        }
    }

    @Test("seeded random corruption of every pass-through reply: the URL is the tag's or the read fails")
    func randomCorruption() {
        var rng = SeededRandom(seed: 13)
        for round in 0..<400 {
            let mode = rng.next() % 4
            let seed = rng.next()
            let corrupt: ([UInt8]) -> [UInt8] = { reply in
                var g = SeededRandom(seed: seed)
                var bytes = reply
                switch mode {
                case 0: bytes = Array(bytes.prefix(Int(g.next() % UInt64(bytes.count + 1))))
                case 1: bytes[Int(g.next() % UInt64(bytes.count))] ^= UInt8(1 + g.next() % 255)
                case 2: bytes.insert(UInt8(truncatingIfNeeded: g.next()), at: Int(g.next() % UInt64(bytes.count)))
                default: bytes = (0..<Int(g.next() % 200)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
                }
                return bytes
            }
            let style: FakePassThroughTag.Style = round % 2 == 0 ? .acr122u : .part3
            var tag = FakePassThroughTag(
                .ntag213(data: Self.tlv(Self.uriRecord(Self.plingsURL))), style: style, corrupt: corrupt)
            let method: ReaderProfile.FastRead = style == .acr122u ? .inCommunicateThru : .transparentSession
            // A flipped byte inside the tag data itself is a reply of the right shape: the same as a tag that
            // holds those bytes, which no reader protocol can tell apart. Only shape errors are checked here.
            guard let result = try? Self.read(&tag, method) else { continue }
            if case .fellBack = result.fastRead {
                #expect(result.uri == Self.plingsURL, "round \(round)")
            }
        }
    }

    @Test("reply parsers check every length")
    func parsers() throws {
        #expect(
            try FastRead.parseInCommunicateThru([0xD5, 0x43, 0x00, 1, 2, 3, 4, 0x90, 0x00], expected: 4).get() == [
                1, 2, 3, 4,
            ])
        #expect(throws: FastRead.Failure.self) { try FastRead.parseInCommunicateThru([0x90], expected: 0).get() }
        #expect(throws: FastRead.Failure.self) {
            try FastRead.parseInCommunicateThru([0xD5, 0x43, 0x90, 0x00], expected: 0).get()
        }
        let reply: [UInt8] = [0xC0, 0x03, 0x00, 0x90, 0x00, 0x96, 0x02, 0x00, 0x00, 0x97, 0x02, 0xAB, 0xCD, 0x90, 0x00]
        #expect(try FastRead.parseTransceiveReply(reply, expected: 2).get() == [0xAB, 0xCD])
        #expect(throws: FastRead.Failure.self) { try FastRead.parseTransceiveReply(reply, expected: 3).get() }
        #expect(throws: FastRead.Failure.self) {
            try FastRead.parseTransceiveReply([0xC0, 0x03, 0x00, 0x90, 0x97, 0x90, 0x00], expected: 0).get()
        }
        #expect(
            FastRead.inCommunicateThru(FastRead.tagCommand(start: 4, end: 7)) == [
                0xFF, 0x00, 0x00, 0x00, 0x05, 0xD4, 0x42, 0x3A, 0x04, 0x07,
            ])
        #expect(
            FastRead.transceive(FastRead.tagCommand(start: 4, end: 7)) == [
                0xFF, 0xC2, 0x00, 0x01, 0x05, 0x95, 0x03, 0x3A, 0x04, 0x07,
            ])
    }
}
