import Testing

@testable import BridgeCore

// Expected values come from the documents, not from the reader: the MAD layout, its CRC-8 (x^8+x^4+x^3+x^2+1,
// preset C7) and the public MAD key A0A1A2A3A4A5 from NXP AN10787; the NFC Forum's application ID E1 03, its
// public key D3F7D3F7D3F7 and the MAD of a freshly NDEF-formatted MIFARE Classic 1K,
// `14 01 03 E1 03 E1 ... 03 E1` (CRC 14, info byte 01, every sector E1 03), from NXP AN1305; the commands from
// PC/SC Part 3 (LOAD KEYS FF 82, GENERAL AUTHENTICATE FF 86, READ BINARY FF B0).

/// A MIFARE Classic card behind a PC/SC Part 3 reader: keys per sector, one authenticated sector at a time.
struct FakeClassicTag: CardTransport {
    var blocks: [[UInt8]]
    var keyA: [[UInt8]]
    var slot: [UInt8]?
    var authenticated: Int?
    var log: [[UInt8]] = []

    static let madKey: [UInt8] = [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5]
    static let ndefKey: [UInt8] = [0xD3, 0xF7, 0xD3, 0xF7, 0xD3, 0xF7]
    /// AN1305's MAD of a freshly formatted 1K: blocks 1 and 2.
    static let formattedMAD: [UInt8] = [0x14, 0x01] + Array(repeating: [0x03, 0xE1], count: 15).flatMap { $0 }

    static func sector(of block: Int) -> Int { block < 128 ? block / 4 : 32 + (block - 128) / 16 }

    /// A 1K formatted as AN1305 shows, holding `data` (TLVs) from sector 1 on.
    static func formatted1K(data: [UInt8], ndefKey: [UInt8] = ndefKey, mad: [UInt8] = formattedMAD) -> FakeClassicTag {
        var blocks = Array(repeating: [UInt8](repeating: 0, count: 16), count: 64)
        blocks[1] = Array(mad[0..<16])
        blocks[2] = Array(mad[16..<32])
        var rest = data
        for sector in 1..<16 {
            for block in (4 * sector)..<(4 * sector + 3) {
                let chunk = Array(rest.prefix(16))
                rest.removeFirst(chunk.count)
                blocks[block] = chunk + [UInt8](repeating: 0, count: 16 - chunk.count)
            }
        }
        return FakeClassicTag(blocks: blocks, keyA: [madKey] + Array(repeating: ndefKey, count: 15))
    }

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        log.append(apdu)
        switch Array(apdu.prefix(2)) {
        case [0xFF, 0xCA]: return [0x04, 0x11, 0x22, 0x33, 0x90, 0x00]
        case [0xFF, 0x82] where apdu.count == 11:
            slot = Array(apdu[5...])
            return [0x90, 0x00]
        case [0xFF, 0x86] where apdu.count == 10:
            let block = Int(apdu[7])
            authenticated = nil
            guard apdu[8] == 0x60, slot == keyA[Self.sector(of: block)] else { return [0x63, 0x00] }
            authenticated = Self.sector(of: block)
            return [0x90, 0x00]
        case [0xFF, 0xB0] where apdu.count == 5 && apdu[4] == 16:
            let block = Int(apdu[3])
            guard authenticated == Self.sector(of: block) else { return [0x63, 0x00] }
            return blocks[block] + [0x90, 0x00]
        default:
            return [0x6A, 0x81]
        }
    }
}

@Suite struct ClassicTagReaderTests {
    let message = NDEFMessage.encode([.uri(nfcPlingsURL)])
    let classic1K = TagKind.mifareClassic(name: "MIFARE Classic 1K")

    @Test func theMADCRCOfAFreshlyFormattedTagIsTheOneAN1305Shows() {
        #expect(ClassicTagReader<FakeClassicTag>.madCRC(Array(FakeClassicTag.formattedMAD[1...])) == 0x14)
    }

    @Test func aPlingsURLIsReadThroughTheMADAndThePublicKeys() throws {
        var tag = FakeClassicTag.formatted1K(data: nfcNDEFTLV(message))
        let result = try TagReader.read(kind: classic1K, transport: &tag)
        #expect(result.uri == nfcPlingsURL && result.noURLReason == nil)
        #expect(result.uid == [0x04, 0x11, 0x22, 0x33])
        // 56-byte message: TLV 58 bytes + terminator = 4 blocks; sector 1 holds 3, so sector 2 gives the 4th.
        #expect(
            tag.log == [
                [0xFF, 0xCA, 0x00, 0x00, 0x00],
                [0xFF, 0x82, 0x00, 0x00, 0x06] + FakeClassicTag.madKey,
                [0xFF, 0x86, 0x00, 0x00, 0x05, 0x01, 0x00, 0x00, 0x60, 0x00],
                [0xFF, 0xB0, 0x00, 0x01, 0x10], [0xFF, 0xB0, 0x00, 0x02, 0x10],
                [0xFF, 0x82, 0x00, 0x00, 0x06] + FakeClassicTag.ndefKey,
                [0xFF, 0x86, 0x00, 0x00, 0x05, 0x01, 0x00, 0x04, 0x60, 0x00],
                [0xFF, 0xB0, 0x00, 0x04, 0x10], [0xFF, 0xB0, 0x00, 0x05, 0x10], [0xFF, 0xB0, 0x00, 0x06, 0x10],
                [0xFF, 0x86, 0x00, 0x00, 0x05, 0x01, 0x00, 0x08, 0x60, 0x00],
                [0xFF, 0xB0, 0x00, 0x08, 0x10],
            ])
        #expect(result.apduCount == 12)
    }

    @Test func aMessageOverManySectorsSkipsTheirTrailers() throws {
        let long = NDEFMessage.encode([.uri(nfcPlingsURL + "&x=" + String(repeating: "a", count: 400))])
        var tag = FakeClassicTag.formatted1K(data: nfcNDEFTLV(long))
        let result = try TagReader.read(kind: classic1K, transport: &tag)
        #expect(result.ndef == long)
        #expect(!tag.log.contains { $0.count == 5 && $0[1] == 0xB0 && $0[3] % 4 == 3 }, "a trailer was read")
    }

    @Test func withoutMADWithAWrongCRCOrPrivateKeysThereIsNoURLAndTheReasonSaysWhy() throws {
        // Factory state: transport key FF..FF everywhere, so the MAD key is refused.
        var fresh = FakeClassicTag.formatted1K(data: [])
        fresh.keyA = Array(repeating: [UInt8](repeating: 0xFF, count: 6), count: 16)
        #expect(try TagReader.read(kind: classic1K, transport: &fresh).noURLReason?.contains("without a MAD") == true)
        var badCRC = FakeClassicTag.formatted1K(
            data: nfcNDEFTLV(message), mad: [0x15] + FakeClassicTag.formattedMAD[1...])
        let crc = try TagReader.read(kind: classic1K, transport: &badCRC).noURLReason ?? ""
        #expect(crc.contains("CRC 0x15 is wrong (computed 0x14)"), "\(crc)")
        var privateKeys = FakeClassicTag.formatted1K(data: nfcNDEFTLV(message), ndefKey: [1, 2, 3, 4, 5, 6])
        let keys = try TagReader.read(kind: classic1K, transport: &privateKeys).noURLReason ?? ""
        #expect(keys.contains("NDEF sector 1 refused the NFC Forum public key"), "\(keys)")
        // The keys loaded are the two public ones and nothing else.
        let loaded = privateKeys.log.filter { $0.starts(with: [0xFF, 0x82]) }.map { Array($0[5...]) }
        #expect(loaded == [FakeClassicTag.madKey, FakeClassicTag.ndefKey])
        // A MAD whose sectors hold other applications (E1 03 nowhere).
        var mad = [UInt8](repeating: 0, count: 32)
        mad[1] = 0x01
        mad[2] = 0x01  // sector 1: 00 01? any ID other than E1 03
        mad[0] = ClassicTagReader<FakeClassicTag>.madCRC(Array(mad[1...]))
        var other = FakeClassicTag.formatted1K(data: nfcNDEFTLV(message), mad: mad)
        #expect(try TagReader.read(kind: classic1K, transport: &other).noURLReason?.contains("no NDEF sector") == true)
    }

    @Test func aReaderThatRefusesLoadKeysGivesTheUIDAndAReason() throws {
        var tag = FakeType2Tag.ntag213(data: [])
        let result = try TagReader.read(kind: classic1K, transport: &tag)
        #expect(result.uid != nil && result.ndef == nil)
        #expect(result.noURLReason?.contains("refused LOAD KEYS") == true, "\(result.noURLReason ?? "")")
    }
}
