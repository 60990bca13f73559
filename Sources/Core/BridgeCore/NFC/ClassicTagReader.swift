/// Reads the NDEF message of a MIFARE Classic 1K or 4K tag, as the NFC Forum maps it ("MIFARE Classic as NFC Type
/// MIFARE Classic Tag", NXP AN1305) over the MIFARE Application Directory (NXP AN10787), through the PC/SC Part 3
/// storage-card commands every supported reader takes:
///
/// - LOAD KEYS `FF 82 00 00 06 <key>`: the key into the reader's volatile key slot 0;
/// - GENERAL AUTHENTICATE `FF 86 00 00 05 01 00 <block> 60 00`: key A from slot 0 for the block's sector;
/// - READ BINARY `FF B0 00 <block> 10`: one 16-byte block (the ACR122U reads no more than one block at a time).
///
/// The MAD (sector 0, blocks 1-2; for 4K also sector 16, blocks 64-66) is read with the MAD's public key A
/// `A0 A1 A2 A3 A4 A5` and its CRC-8 checked, after the General Purpose Byte (byte 9 of sector 0's trailer,
/// block 3) said there is one (its DA bit, bit 7) and which version (its ADV bits 1-0: 1 MAD1, sectors 1-15; 2
/// MAD2, which a 4K card also keeps in sector 16 for sectors 17-39); the sectors whose application ID is the NFC Forum's `E1 03` hold the
/// NDEF TLVs in their data blocks (sector trailers skipped), read with the NFC Forum's public key A
/// `D3 F7 D3 F7 D3 F7` until the NDEF TLV is complete. A tag without a MAD, with a wrong CRC, without an NDEF
/// sector or with private keys is a read without a URL, with that reason. Only these public keys are ever loaded.
struct ClassicTagReader<Transport: CardTransport> {
    var session: CardSession<Transport>
    /// A 4K card (40 sectors, MAD2 in sector 16); else 1K (16 sectors).
    let is4K: Bool

    /// The MAD's public key A (AN10787).
    static var madKey: [UInt8] { [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5] }
    /// The NFC Forum's public key A for NDEF sectors (AN1305).
    static var ndefKey: [UInt8] { [0xD3, 0xF7, 0xD3, 0xF7, 0xD3, 0xF7] }
    /// The NFC Forum's application ID in the MAD, `E1 03` (function cluster E1, application code 03), stored
    /// low byte first.
    static var ndefAID: UInt16 { 0xE103 }

    init(session: CardSession<Transport>, is4K: Bool) {
        self.session = session
        self.is4K = is4K
    }

    /// Where the message is, or why there is none.
    mutating func readNDEF() throws(TagReadError) -> NDEFLookup {
        guard try loadKey(Self.madKey, name: "the MAD key") else {
            return .none(reason: "MIFARE Classic: the reader refused LOAD KEYS (it cannot authenticate sectors)")
        }
        guard try authenticate(sector: 0) else {
            return .none(reason: "MIFARE Classic without a MAD: sector 0 refused the MAD key (not NDEF-formatted)")
        }
        // AN10787: the General Purpose Byte decides, not the presence of bytes that happen to have a valid CRC.
        let gpb = try readBlock(3)[9]
        guard gpb & 0x80 != 0 else {
            let byte = NFCHex.byte(gpb)
            return .none(
                reason: "MIFARE Classic without a MAD: its General Purpose Byte 0x\(byte) says none (DA clear)")
        }
        let madVersion = gpb & 0x03
        guard madVersion == 1 || madVersion == 2 else {
            return .none(
                reason: "MIFARE Classic: MAD version \(madVersion) (General Purpose Byte 0x\(NFCHex.byte(gpb))) "
                    + "is neither MAD1 nor MAD2")
        }
        let mad1 = try readBlock(1) + readBlock(2)
        guard Self.madCRC(Array(mad1[1...])) == mad1[0] else {
            return .none(
                reason: "MIFARE Classic MAD: CRC 0x\(NFCHex.byte(mad1[0])) is wrong (computed 0x"
                    + NFCHex.byte(Self.madCRC(Array(mad1[1...]))) + ")")
        }
        var aids = Self.applicationIDs(mad1, firstSector: 1, count: 15)
        // MAD2 only where the GPB says so: a 4K card with MAD1 has its directory, and NDEF, in sectors 1-15. (A 1K
        // card has no sector 16: its MAD2 is MAD1's sector 0 alone.)
        if is4K && madVersion == 2 {
            guard try authenticate(sector: 16) else {
                return .none(reason: "MIFARE Classic 4K: sector 16 (MAD2) refused the MAD key")
            }
            let mad2 = try readBlock(64) + readBlock(65) + readBlock(66)
            guard Self.madCRC(Array(mad2[1...])) == mad2[0] else {
                return .none(reason: "MIFARE Classic MAD2: CRC 0x\(NFCHex.byte(mad2[0])) is wrong")
            }
            aids += Self.applicationIDs(mad2, firstSector: 17, count: 23)
        }
        // The NDEF sectors: the first run of consecutive sectors with the NFC Forum's ID.
        guard let first = aids.firstIndex(where: { $0.aid == Self.ndefAID }) else {
            return .none(reason: "MIFARE Classic: no NDEF sector in the MAD (no application ID E1 03)")
        }
        let sectors = aids[first...].prefix { $0.aid == Self.ndefAID }.map(\.sector)
        guard try loadKey(Self.ndefKey, name: "the NFC Forum key") else {
            return .none(reason: "MIFARE Classic: the reader refused LOAD KEYS (it cannot authenticate sectors)")
        }
        var data: [UInt8] = []
        for sector in sectors {
            guard try authenticate(sector: sector) else {
                return .none(
                    reason: "MIFARE Classic: NDEF sector \(sector) refused the NFC Forum public key (private keys)")
            }
            for block in Self.dataBlocks(sector: sector) {
                data += try readBlock(block)
                switch NDEFTLVWalk.walk(data) {
                case .needMore: continue
                case .found(let lookup): return lookup
                case .malformed(let error): throw error
                }
            }
        }
        switch NDEFTLVWalk.walk(data, complete: true, area: "the NDEF sectors") {
        case .found(let lookup): return lookup
        case .malformed(let error): throw error
        case .needMore: return .none(reason: "MIFARE Classic: no NDEF TLV in the NDEF sectors")
        }
    }

    /// CRC-8 of the MAD (AN10787): polynomial x^8 + x^4 + x^3 + x^2 + 1, preset 0xC7, over the info byte and the
    /// application IDs (every byte after the CRC byte).
    static func madCRC(_ bytes: [UInt8]) -> UInt8 {
        var crc: UInt8 = 0xC7
        for byte in bytes {
            crc ^= byte
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x1D : crc << 1 }
        }
        return crc
    }

    /// The application ID of each sector the MAD lists: after the CRC and info bytes, two bytes per sector, low
    /// byte first.
    static func applicationIDs(_ mad: [UInt8], firstSector: Int, count: Int) -> [(sector: Int, aid: UInt16)] {
        (0..<count).compactMap { index in
            let offset = 2 + 2 * index
            guard offset + 1 < mad.count else { return nil }
            return (firstSector + index, UInt16(mad[offset + 1]) << 8 | UInt16(mad[offset]))
        }
    }

    /// The first block of a sector: sectors 0-31 have 4 blocks, sectors 32-39 (4K) 16.
    static func firstBlock(sector: Int) -> Int { sector < 32 ? 4 * sector : 128 + 16 * (sector - 32) }

    /// A sector's data blocks, its trailer (the last block) left out.
    static func dataBlocks(sector: Int) -> Range<Int> {
        let first = firstBlock(sector: sector)
        return first..<(first + (sector < 32 ? 3 : 15))
    }

    /// True when the reader took the key into its volatile slot 0.
    private mutating func loadKey(_ key: [UInt8], name: String) throws(TagReadError) -> Bool {
        try session.exchange([0xFF, 0x82, 0x00, 0x00, 0x06] + key, "LOAD KEYS (\(name))").isSuccess
    }

    /// True when the sector accepted key A from slot 0; false when it refused it (63 00 and the like).
    private mutating func authenticate(sector: Int) throws(TagReadError) -> Bool {
        let block = UInt8(Self.firstBlock(sector: sector))
        let response = try session.exchange(
            [0xFF, 0x86, 0x00, 0x00, 0x05, 0x01, 0x00, block, 0x60, 0x00],
            "GENERAL AUTHENTICATE sector \(sector)")
        return response.isSuccess
    }

    private mutating func readBlock(_ block: Int) throws(TagReadError) -> [UInt8] {
        let command = "READ BINARY block \(block)"
        let response = try session.exchange([0xFF, 0xB0, 0x00, UInt8(block), 0x10], command)
        guard response.isSuccess else { throw .statusWord(response.statusWord, during: command) }
        guard response.data.count == 16 else {
            throw .malformedResponse(during: command, reason: "\(response.data.count) bytes instead of 16")
        }
        return response.data
    }
}
