/// The capability container file (E103) of an NFC Forum Type 4 tag, mapping version 2.0 or 3.0.
///
/// Layout: CCLEN (2), mapping version (1), MLe (2), MLc (2), then the NDEF File Control TLV
/// `04 06 | file id (2) | max NDEF file size (2) | read access (1) | write access (1)`: 15 bytes.
public struct Type4CapabilityContainer: Sendable, Equatable {
    /// Mapping version byte (0x20 is 2.0).
    public var version: UInt8
    /// Maximum R-APDU data size the tag returns (MLe).
    public var maxReadLength: Int
    /// Maximum C-APDU data size the tag accepts (MLc).
    public var maxWriteLength: Int
    /// The NDEF file identifier.
    public var fileID: UInt16
    /// The maximum NDEF file size, including the 2 NLEN bytes.
    public var maxFileSize: Int
    /// Read access byte (0x00 granted).
    public var readAccess: UInt8
    /// Write access byte (0x00 granted, 0xFF never).
    public var writeAccess: UInt8

    /// File ids the Type 4 spec reserves, so not valid for the NDEF file.
    static let reservedFileIDs: Set<UInt16> = [0x0000, 0xE102, 0xE103, 0x3F00, 0x3FFF, 0xFFFF]

    /// Parses the first 15 bytes of the CC file, or returns why it is unusable.
    ///
    /// Mapping versions 2.x and 3.x are accepted (their 15-byte CC is the same). Version 1.0 tags are
    /// refused: they expect SELECTs with P2=00 and this reader sends P2=0C. The extended NDEF File
    /// Control TLV (tag 06, 4-byte sizes, v3.0) is refused: it implies messages beyond short APDUs.
    /// MLe below the spec minimum of 15 is tolerated (it only makes the read slower); MLe 0 is not.
    public static func parse(_ bytes: [UInt8]) -> Result<Type4CapabilityContainer, TagReadError> {
        func bad(_ reason: String) -> Result<Type4CapabilityContainer, TagReadError> {
            .failure(.badCapabilityContainer(reason))
        }
        guard bytes.count >= 15 else { return bad("CC file returned \(bytes.count) bytes, need 15") }
        let ccLength = Int(bytes[0]) << 8 | Int(bytes[1])
        guard ccLength >= 15 else { return bad("CCLEN \(ccLength) is below 15") }
        let version = bytes[2]
        guard version >> 4 == 2 || version >> 4 == 3 else {
            return bad("mapping version \(version >> 4).\(version & 0x0F) not supported (need 2.x or 3.x)")
        }
        let mle = Int(bytes[3]) << 8 | Int(bytes[4])
        let mlc = Int(bytes[5]) << 8 | Int(bytes[6])
        guard mle > 0 else { return bad("MLe is 0") }
        if bytes[7] == 0x06 {
            return bad("extended NDEF File Control TLV (tag 06) not supported")
        }
        guard bytes[7] == 0x04 else {
            return bad("expected NDEF File Control TLV (tag 04), found tag 0x\(NFCHex.byte(bytes[7]))")
        }
        guard bytes[8] >= 6 else { return bad("NDEF File Control TLV length \(bytes[8]), need 6") }
        let fileID = UInt16(bytes[9]) << 8 | UInt16(bytes[10])
        guard !reservedFileIDs.contains(fileID) else {
            return bad("NDEF file id \(NFCHex.word(fileID)) is reserved")
        }
        let maxSize = Int(bytes[11]) << 8 | Int(bytes[12])
        guard maxSize >= 2 else { return bad("maximum NDEF file size \(maxSize) cannot hold NLEN") }
        guard bytes[13] == 0x00 else {
            return bad("NDEF file read access 0x\(NFCHex.byte(bytes[13])) (not granted)")
        }
        return .success(
            Type4CapabilityContainer(
                version: version, maxReadLength: mle, maxWriteLength: mlc,
                fileID: fileID, maxFileSize: maxSize, readAccess: bytes[13],
                writeAccess: bytes[14]))
    }
}
