import Testing

@testable import BridgeCore

// Expected values come from the documents, not from the reader: the CC layout (magic E1/E2, version and access in
// byte 1, MLEN in byte 2 or, when it is 00, in bytes 6-7, MBREAD in bit 0 of byte 3) from the NFC Forum Type 5 Tag
// specification; `E1 40 0E 01`, the CC NXP ships NDEF-formatted ICODE SLIX tags with (28 blocks of 4 bytes);
// `E2 40 00 01 00 00 04 00`, the 8-byte CC ST's NDEF library writes on an ST25DV64K (8192 bytes); the ICODE SLI
// ATR `3B 8F 80 01 80 4F 0C A0 00 00 03 06 0B 00 14 00 00 00 00 77` (PC/SC Part 3: standard 0B ISO 15693 part 3,
// card name 0014 ICODESLI); READ BINARY `FF B0 P1 P2 Le` from PC/SC Part 3.

/// An ISO 15693 tag behind a reader that speaks it: READ BINARY of block P1P2, Le 00 one block, Le = n x 4 n
/// blocks (READ MULTIPLE BLOCKS, unless the tag lacks it).
struct FakeType5Tag: CardTransport {
    var memory: [UInt8]
    var takesMultipleBlocks = true
    var log: [[UInt8]] = []
    static let blockSize = 4

    /// `cc`, then `data` (TLVs), zero-padded to `blocks` blocks.
    static func tag(cc: [UInt8], data: [UInt8], blocks: Int = 28) -> FakeType5Tag {
        let image = cc + data
        return FakeType5Tag(memory: image + [UInt8](repeating: 0, count: blocks * blockSize - image.count))
    }

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        log.append(apdu)
        if apdu == [0xFF, 0xCA, 0x00, 0x00, 0x00] {
            // The UID E0 04 01 50 12 34 56 78 as a reader hands it over: in the order the tag sends it, least
            // significant byte first (ISO/IEC 15693-3).
            return [0x78, 0x56, 0x34, 0x12, 0x50, 0x01, 0x04, 0xE0, 0x90, 0x00]
        }
        guard apdu.count == 5, apdu[0] == 0xFF, apdu[1] == 0xB0 else { return [0x6A, 0x81] }
        let block = Int(apdu[2]) << 8 | Int(apdu[3])
        let length = apdu[4] == 0 ? Self.blockSize : Int(apdu[4])
        guard length % Self.blockSize == 0 else { return [0x67, 0x00] }
        if length > Self.blockSize, !takesMultipleBlocks { return [0x6A, 0x81] }
        let start = block * Self.blockSize
        guard start + length <= memory.count else { return [0x6B, 0x00] }
        return Array(memory[start..<(start + length)]) + [0x90, 0x00]
    }
}

@Suite struct Type5TagReaderTests {
    let message = NDEFMessage.encode([.uri(nfcPlingsURL)])
    let slix = TagKind.type5(name: "ICODESLI")
    static let slixCC: [UInt8] = [0xE1, 0x40, 0x0E, 0x01]
    static let st25dv64kCC: [UInt8] = [0xE2, 0x40, 0x00, 0x01, 0x00, 0x00, 0x04, 0x00]
    var iso15693: TagReadOptions {
        var options = TagReadOptions()
        options.readsISO15693 = true
        return options
    }

    @Test func anICODESLIATRIsType5() {
        let atr: [UInt8] = [
            0x3B, 0x8F, 0x80, 0x01, 0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06, 0x0B, 0x00, 0x14, 0x00, 0x00, 0x00,
            0x00, 0x77,
        ]
        #expect(TagKind.from(atr: atr) == .type5(name: "ICODESLI"))
        #expect(TagKind.from(atr: atr).code == "type5")
        var unnamed = atr
        unnamed[14] = 0x00
        #expect(TagKind.from(atr: unnamed) == .type5(name: "ISO 15693 tag"))
    }

    @Test func theCapabilityContainersOfShippedTagsParse() {
        #expect(
            Type5CapabilityContainer.parse(Self.slixCC)
                == .valid(.init(length: 4, areaSize: 112, multipleBlockRead: true, twoByteAddresses: false)))
        #expect(Type5CapabilityContainer.parse(Array(Self.st25dv64kCC.prefix(4))) == .needsEightBytes)
        #expect(
            Type5CapabilityContainer.parse(Self.st25dv64kCC)
                == .valid(.init(length: 8, areaSize: 8192, multipleBlockRead: true, twoByteAddresses: true)))
    }

    @Test func aPlingsURLOnAnICODESLIXTakesBlockZeroAndOneMultipleBlockRead() throws {
        var tag = FakeType5Tag.tag(cc: Self.slixCC, data: nfcNDEFTLV(message))
        let result = try TagReader.read(kind: slix, transport: &tag, options: iso15693)
        #expect(result.uri == nfcPlingsURL && result.noURLReason == nil)
        // Written most significant byte first, as ISO/IEC 15693-3 and the tag's label write it: E0 first.
        #expect(result.uid == [0xE0, 0x04, 0x01, 0x50, 0x12, 0x34, 0x56, 0x78])
        // The 59-byte TLV lies in blocks 1-15; the first read after the CC asks for 64 bytes (16 blocks).
        #expect(
            tag.log == [
                [0xFF, 0xCA, 0x00, 0x00, 0x00], [0xFF, 0xB0, 0x00, 0x00, 0x00], [0xFF, 0xB0, 0x00, 0x01, 0x40],
            ])
    }

    @Test func withoutMBREADEveryBlockIsItsOwnReadAndNoMoreThanTheTLVNeeds() throws {
        var tag = FakeType5Tag.tag(cc: [0xE1, 0x40, 0x0E, 0x00], data: nfcNDEFTLV(message))
        let result = try TagReader.read(kind: slix, transport: &tag, options: iso15693)
        #expect(result.uri == nfcPlingsURL)
        // 2 + 56 bytes of NDEF TLV after the 4-byte CC end in block 15: blocks 1-15, one each.
        #expect(tag.log.dropFirst(2).map { $0[3] } == Array(1...15))
        #expect(tag.log.dropFirst(2).allSatisfy { $0[4] == 4 })
        #expect(result.apduCount == 17)
    }

    @Test func aTagThatRefusesMultipleBlocksDespiteItsCCIsReadBlockByBlock() throws {
        var tag = FakeType5Tag.tag(cc: Self.slixCC, data: nfcNDEFTLV(message))
        tag.takesMultipleBlocks = false
        let result = try TagReader.read(kind: slix, transport: &tag, options: iso15693)
        #expect(result.uri == nfcPlingsURL)
        #expect(result.apduCount == 18, "UID, block 0, the refused 16-block read, then blocks 1-15")
    }

    @Test func anEightByteCCWithTwoByteAddressesReadsPastBlock255() throws {
        let long = NDEFMessage.encode([.uri(nfcPlingsURL + "&x=" + String(repeating: "a", count: 1200))])
        var tag = FakeType5Tag.tag(cc: Self.st25dv64kCC, data: nfcNDEFTLV(long), blocks: 2048)
        let result = try TagReader.read(kind: .type5(name: "ISO 15693 tag"), transport: &tag, options: iso15693)
        #expect(result.ndef == long)
        // Block 1 completes the CC; then 32 blocks (128 bytes) per read, the block number in P1 P2.
        #expect(tag.log[2] == [0xFF, 0xB0, 0x00, 0x01, 0x04])
        #expect(tag.log[3] == [0xFF, 0xB0, 0x00, 0x02, 0x40])
        #expect(tag.log.contains { $0[1] == 0xB0 && $0[2] == 0x01 }, "no read addressed a block past 255")
        // The CC (8 bytes) and the TLV (4-byte header, the message) end in this block; nothing past it is read.
        let end = (8 + 4 + long.count - 1) / 4
        let last = tag.log.last.map { (Int($0[2]) << 8 | Int($0[3])) + Int($0[4]) / 4 - 1 }
        #expect(last == end)
    }

    @Test func aProprietaryTLVBeforeTheMessageIsSkippedByItsLengthNotRead() throws {
        // An ST25DV64K with a 1040-byte Proprietary TLV (`FD`, 3-byte length `FF 04 10`) before the NDEF TLV. The NFC
        // Forum Type 5 rules: a TLV's length says where the next one starts, and a reader skips a TLV it does not
        // use. Area offsets: the Proprietary TLV's value is 4..<1044, the NDEF TLV starts at 1044, that is byte 1052
        // of the tag (after the 8-byte CC): block 263.
        let proprietary: [UInt8] = [0xFD, 0xFF, 0x04, 0x10] + [UInt8](repeating: 0xA5, count: 1040)
        var tag = FakeType5Tag.tag(cc: Self.st25dv64kCC, data: proprietary + nfcNDEFTLV(message), blocks: 2048)
        let result = try TagReader.read(kind: .type5(name: "ISO 15693 tag"), transport: &tag, options: iso15693)
        #expect(result.uri == nfcPlingsURL)
        // GET UID, block 0, block 1 (the rest of the CC), 64 bytes from block 2 (the Proprietary TLV's header),
        // then the blocks from 263 on: 5 exchanges, where reading the value through took 14.
        #expect(tag.log.count == 5, "\(tag.log.map { NFCHex.bytes($0) })")
        #expect(tag.log.last.map { Int($0[2]) << 8 | Int($0[3]) } == 263)
        let readBlocks = tag.log.dropFirst().flatMap { apdu -> [Int] in
            let first = Int(apdu[2]) << 8 | Int(apdu[3])
            return Array(first..<(first + max(1, Int(apdu[4]) / 4)))
        }
        // Blocks 18-262 hold nothing but the Proprietary TLV's value.
        #expect(!readBlocks.contains { (18...262).contains($0) })
    }

    @Test func aTLVWhoseLengthRunsPastTheAreaIsTruncatedAndNothingPastTheAreaIsRead() throws {
        // The ST25DV64K's CC declares 8192 bytes after its 8: blocks 2-2049. A Proprietary TLV claiming 65535 bytes
        // runs past that end: the read stops with the TLV truncated, and no read asks for a block past block 2049.
        let huge: [UInt8] = [0xFD, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 60)
        var tag = FakeType5Tag.tag(cc: Self.st25dv64kCC, data: huge, blocks: 2100)
        #expect(
            nfcReadError { () throws(TagReadError) in
                try TagReader.read(kind: .type5(name: "ISO 15693 tag"), transport: &tag, options: iso15693)
            } == .tlvTruncated(tag: 0xFD, offset: 0))
        let lastBlock = tag.log.dropFirst().map { (Int($0[2]) << 8 | Int($0[3])) + max(1, Int($0[4]) / 4) - 1 }.max()
        #expect((lastBlock ?? 0) <= 2049, "\(tag.log.map { NFCHex.bytes($0) })")
    }

    @Test func blankLockedAndOverflowingTagsAreReasonsOrErrors() throws {
        var blank = FakeType5Tag.tag(cc: [0, 0, 0, 0], data: [])
        let reason = try TagReader.read(kind: slix, transport: &blank, options: iso15693).noURLReason ?? ""
        #expect(reason.contains("blank tag"), "\(reason)")
        var locked = FakeType5Tag.tag(cc: [0xE1, 0x48, 0x0E, 0x01], data: nfcNDEFTLV(message))
        #expect(
            nfcReadError { () throws(TagReadError) in
                try TagReader.read(kind: slix, transport: &locked, options: iso15693)
            } == .badCapabilityContainer("read access 2 (not granted)"))
        // MLEN 2: a 16-byte T5T_Area cannot hold the 59-byte TLV.
        var small = FakeType5Tag.tag(cc: [0xE1, 0x40, 0x02, 0x01], data: nfcNDEFTLV(message))
        #expect(
            nfcReadError { () throws(TagReadError) in
                try TagReader.read(kind: slix, transport: &small, options: iso15693)
            } == .tlvTruncated(tag: 0x03, offset: 0))
    }

    @Test func aReaderWithoutISO15693SaysSoAndSendsNoRead() throws {
        var tag = FakeType5Tag.tag(cc: Self.slixCC, data: nfcNDEFTLV(message))
        let result = try TagReader.read(kind: slix, transport: &tag)
        #expect(result.noURLReason?.hasPrefix("this reader cannot read ISO 15693") == true)
        #expect(tag.log == [[0xFF, 0xCA, 0x00, 0x00, 0x00]])
        #expect(ReaderProfile.omnikey.readsISO15693 && ReaderProfile.acr1552u.readsISO15693)
        #expect(!ReaderProfile.acr122u.readsISO15693 && !ReaderProfile.plain.readsISO15693)
        #expect(ReaderProfile.recognize(readerName: "ACS ACR1552 1S CL Reader PICC 00 00") == .acr1552u)
    }
}
