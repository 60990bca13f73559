import Testing

@testable import BridgeCore

// Expected values come from the documents, not from the reader: the MAD layout, its CRC-8 (x^8+x^4+x^3+x^2+1,
// preset C7) and the public MAD key A0A1A2A3A4A5 from NXP AN10787; the NFC Forum's application ID E1 03, its
// public key D3F7D3F7D3F7 and the MAD of a freshly NDEF-formatted MIFARE Classic 1K,
// `14 01 03 E1 03 E1 ... 03 E1` (CRC 14, info byte 01, every sector E1 03), from NXP AN1305; the commands from
// PC/SC Part 3 (LOAD KEYS FF 82, GENERAL AUTHENTICATE FF 86, READ BINARY FF B0); the General Purpose Byte (byte 9
// of sector 0's trailer: DA bit 7 "MAD available", MA bit 6 "multi-application card", ADV bits 1-0 the MAD
// version, 01 MAD1, 10 MAD2) from AN10787, which has an NDEF-formatted 1K's sector 0 trailer carry access bits
// 78 77 88 and GPB C1 (MAD1), a 4K's C2 (MAD2).

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

    /// Sector 0's trailer as read with key A: key A reads as zeros, the access bits AN10787 gives the MAD sector
    /// (78 77 88), the General Purpose Byte, key B not readable (zeros).
    static func madTrailer(gpb: UInt8) -> [UInt8] {
        [UInt8](repeating: 0, count: 6) + [0x78, 0x77, 0x88, gpb] + [UInt8](repeating: 0, count: 6)
    }

    /// A 1K formatted as AN1305 shows, holding `data` (TLVs) from sector 1 on.
    static func formatted1K(
        data: [UInt8], ndefKey: [UInt8] = ndefKey, mad: [UInt8] = formattedMAD, gpb: UInt8 = 0xC1
    ) -> FakeClassicTag {
        var blocks = Array(repeating: [UInt8](repeating: 0, count: 16), count: 64)
        blocks[1] = Array(mad[0..<16])
        blocks[2] = Array(mad[16..<32])
        blocks[3] = madTrailer(gpb: gpb)
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

    /// A 4K: sector 0 as `formatted1K` makes it, with `gpb`; MAD2 in sector 16 (CRC, info byte 00, E1 03 for
    /// sectors 17-39) with the MAD key; `data` in sector 1.
    static func formatted4K(data: [UInt8], gpb: UInt8) -> FakeClassicTag {
        let small = formatted1K(data: data, gpb: gpb)
        var blocks = small.blocks + Array(repeating: [UInt8](repeating: 0, count: 16), count: 192)
        var mad2: [UInt8] = [0x00, 0x00] + Array(repeating: [0x03, 0xE1], count: 23).flatMap { $0 }
        mad2[0] = ClassicTagReader<FakeClassicTag>.madCRC(Array(mad2[1...]))
        blocks[64] = Array(mad2[0..<16])
        blocks[65] = Array(mad2[16..<32])
        blocks[66] = Array(mad2[32..<48])
        var keys = small.keyA + Array(repeating: ndefKey, count: 24)
        keys[16] = madKey
        return FakeClassicTag(blocks: blocks, keyA: keys)
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
                // Sector 0's trailer for the General Purpose Byte, then the MAD.
                [0xFF, 0xB0, 0x00, 0x03, 0x10], [0xFF, 0xB0, 0x00, 0x01, 0x10], [0xFF, 0xB0, 0x00, 0x02, 0x10],
                [0xFF, 0x82, 0x00, 0x00, 0x06] + FakeClassicTag.ndefKey,
                [0xFF, 0x86, 0x00, 0x00, 0x05, 0x01, 0x00, 0x04, 0x60, 0x00],
                [0xFF, 0xB0, 0x00, 0x04, 0x10], [0xFF, 0xB0, 0x00, 0x05, 0x10], [0xFF, 0xB0, 0x00, 0x06, 0x10],
                [0xFF, 0x86, 0x00, 0x00, 0x05, 0x01, 0x00, 0x08, 0x60, 0x00],
                [0xFF, 0xB0, 0x00, 0x08, 0x10],
            ])
        #expect(result.apduCount == 13)
    }

    @Test func aMessageOverManySectorsSkipsTheirTrailers() throws {
        let long = NDEFMessage.encode([.uri(nfcPlingsURL + "&x=" + String(repeating: "a", count: 400))])
        var tag = FakeClassicTag.formatted1K(data: nfcNDEFTLV(long))
        let result = try TagReader.read(kind: classic1K, transport: &tag)
        #expect(result.ndef == long)
        // Sector 0's trailer is read for its General Purpose Byte; no NDEF sector's trailer is read.
        #expect(
            !tag.log.contains { $0.count == 5 && $0[1] == 0xB0 && $0[3] % 4 == 3 && $0[3] != 3 }, "a trailer was read")
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

    @Test func theGeneralPurposeByteDecidesWhetherThereIsAMADAndWhichVersion() throws {
        // DA clear (GPB 41: MA set, ADV 01): no MAD, although blocks 1-2 hold one with a valid CRC.
        var noDA = FakeClassicTag.formatted1K(data: nfcNDEFTLV(message), gpb: 0x41)
        let none = try TagReader.read(kind: classic1K, transport: &noDA)
        #expect(none.uri == nil && none.uid == [0x04, 0x11, 0x22, 0x33])
        #expect(none.noURLReason == "MIFARE Classic without a MAD: its General Purpose Byte 0x41 says none (DA clear)")
        #expect(!noDA.log.contains { $0.count == 5 && $0[1] == 0xB0 && $0[3] == 1 }, "the MAD was read")
        // ADV 00 and 11 are neither MAD1 nor MAD2.
        for gpb: UInt8 in [0xC0, 0xC3] {
            var unknown = FakeClassicTag.formatted1K(data: nfcNDEFTLV(message), gpb: gpb)
            let reason = try TagReader.read(kind: classic1K, transport: &unknown).noURLReason ?? ""
            #expect(reason.contains("MAD version \(gpb & 3) (General Purpose Byte 0x\(NFCHex.byte(gpb)))"), "\(reason)")
        }
    }

    @Test func a4KCardReadsMAD2OnlyWhenItsGeneralPurposeByteSaysMAD2() throws {
        let classic4K = TagKind.mifareClassic(name: "MIFARE Classic 4K")
        func sectorsAuthenticated(_ tag: FakeClassicTag) -> [Int] {
            tag.log.filter { $0.starts(with: [0xFF, 0x86]) }.map { FakeClassicTag.sector(of: Int($0[7])) }
        }
        // MAD1 (GPB C1): the directory is sector 0 alone, for sectors 1-15; sector 16 is never asked.
        var mad1 = FakeClassicTag.formatted4K(data: nfcNDEFTLV(message), gpb: 0xC1)
        #expect(try TagReader.read(kind: classic4K, transport: &mad1).uri == nfcPlingsURL)
        #expect(sectorsAuthenticated(mad1) == [0, 1, 2])
        // MAD2 (GPB C2): sector 16 is read too, and its CRC checked.
        var mad2 = FakeClassicTag.formatted4K(data: nfcNDEFTLV(message), gpb: 0xC2)
        #expect(try TagReader.read(kind: classic4K, transport: &mad2).uri == nfcPlingsURL)
        #expect(sectorsAuthenticated(mad2) == [0, 16, 1, 2])
        #expect(mad2.log.contains([0xFF, 0xB0, 0x00, 0x42, 0x10]), "block 66, the end of MAD2, was read")
    }

    @Test func aReaderThatRefusesLoadKeysGivesTheUIDAndAReason() throws {
        var tag = FakeType2Tag.ntag213(data: [])
        let result = try TagReader.read(kind: classic1K, transport: &tag)
        #expect(result.uid != nil && result.ndef == nil)
        #expect(result.noURLReason?.contains("refused LOAD KEYS") == true, "\(result.noURLReason ?? "")")
    }
}
