/// The capability container of an NFC Forum Type 5 tag (ISO 15693), at the start of block 0 (NFC Forum T5T).
///
/// Byte 0 magic: `E1` (blocks addressed with one byte) or `E2` (two bytes, for tags of more than 256 blocks).
/// Byte 1: mapping version in bits 7-4 (major in 7-6, `01` for 1.x), read access in bits 3-2 (`00` granted),
/// write access in bits 1-0. Byte 2: MLEN, the size of the T5T_Area after the CC in 8-byte units; `00` means an
/// 8-byte CC whose bytes 6-7 hold MLEN instead (big-endian), for areas over 2040 bytes. Byte 3: features, bit 0
/// MBREAD (the tag takes READ MULTIPLE BLOCKS).
public struct Type5CapabilityContainer: Sendable, Equatable {
    /// 4, or 8 when byte 2 is `00`: where the T5T_Area (the TLVs) starts.
    public var length: Int
    /// The T5T_Area's size in bytes (MLEN times 8).
    public var areaSize: Int
    /// Whether the tag takes READ MULTIPLE BLOCKS (byte 3, bit 0).
    public var multipleBlockRead: Bool
    /// Whether block numbers take two bytes (magic `E2`).
    public var twoByteAddresses: Bool

    /// The outcome of looking at the first bytes of block 0.
    public enum Parsed: Sendable, Equatable {
        case valid(Type5CapabilityContainer)
        /// Byte 2 is `00`: the CC is 8 bytes long and only `have` of them were given.
        case needsEightBytes
        /// Not NDEF formatted (no `E1`/`E2` magic): a result ("no NDEF"), not an error.
        case notFormatted(reason: String)
        /// Formatted but unusable: an error, with the reason.
        case invalid(reason: String)
    }

    /// Classifies the CC from the first 4 (or 8) bytes of the tag.
    public static func parse(_ cc: [UInt8]) -> Parsed {
        guard cc.count >= 4 else { return .invalid(reason: "block 0 gave \(cc.count) bytes, need 4") }
        guard cc[0] == 0xE1 || cc[0] == 0xE2 else {
            if cc.prefix(4).allSatisfy({ $0 == 0 }) {
                return .notFormatted(reason: "blank tag: capability container is empty (not NDEF formatted)")
            }
            return .notFormatted(
                reason: "not NDEF formatted: CC magic 0x\(NFCHex.byte(cc[0])), expected 0xE1 or 0xE2")
        }
        let major = cc[1] >> 6
        guard major == 1 else {
            return .invalid(reason: "mapping version \(major).\((cc[1] >> 4) & 0x03) not supported (need 1.x)")
        }
        let readAccess = (cc[1] >> 2) & 0x03
        guard readAccess == 0 else { return .invalid(reason: "read access \(readAccess) (not granted)") }
        var length = 4
        var units = Int(cc[2])
        if cc[2] == 0 {
            guard cc.count >= 8 else { return .needsEightBytes }
            length = 8
            units = Int(cc[6]) << 8 | Int(cc[7])
        }
        guard units > 0 else { return .invalid(reason: "T5T_Area size is 0") }
        return .valid(
            Type5CapabilityContainer(
                length: length, areaSize: units * 8, multipleBlockRead: cc[3] & 0x01 != 0,
                twoByteAddresses: cc[0] == 0xE2))
    }
}
