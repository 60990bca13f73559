/// The 4-byte capability container of an NFC Forum Type 2 tag (page 3).
///
/// Byte 0 magic 0xE1, byte 1 mapping version (major in the high nibble), byte 2 data area size / 8,
/// byte 3 access (read access in the high nibble, 0 = granted; write access in the low nibble).
public struct Type2CapabilityContainer: Sendable, Equatable {
    /// Mapping version byte (0x10 is 1.0).
    public var version: UInt8
    /// Size of the data area in bytes (CC byte 2 times 8), starting at page 4.
    public var dataAreaSize: Int
    /// Access byte.
    public var access: UInt8

    /// The outcome of looking at page 3.
    public enum Parsed: Sendable, Equatable {
        /// A usable NDEF-formatted CC.
        case valid(Type2CapabilityContainer)
        /// Not NDEF formatted (no 0xE1 magic): a result ("no NDEF"), not an error.
        case notFormatted(reason: String)
        /// Formatted (0xE1) but unusable: an error, with the reason.
        case invalid(reason: String)
    }

    /// Classifies page 3. Fewer than 4 bytes is `invalid`.
    ///
    /// An all-zero CC is a blank, never formatted tag (original Ultralight ships that way). Any other
    /// byte than 0xE1 in byte 0 also means "not NDEF formatted" per the Type 2 spec, so it is a result,
    /// not an error. With 0xE1: major version must be 1, size non-zero, read access 0 (granted).
    public static func parse(_ cc: [UInt8]) -> Parsed {
        guard cc.count >= 4 else {
            return .invalid(reason: "page 3 returned \(cc.count) bytes, need 4")
        }
        if cc[0] != 0xE1 {
            if cc[0] == 0 && cc[1] == 0 && cc[2] == 0 && cc[3] == 0 {
                return .notFormatted(reason: "blank tag: capability container is empty (not NDEF formatted)")
            }
            return .notFormatted(reason: "not NDEF formatted: CC magic 0x\(NFCHex.byte(cc[0])), expected 0xE1")
        }
        let major = cc[1] >> 4
        guard major == 1 else {
            return .invalid(reason: "mapping version \(major).\(cc[1] & 0x0F) not supported (need 1.x)")
        }
        guard cc[2] != 0 else {
            return .invalid(reason: "data area size is 0")
        }
        guard cc[3] >> 4 == 0 else {
            return .invalid(reason: "read access 0x\(NFCHex.byte(cc[3] >> 4)) (not granted)")
        }
        return .valid(Type2CapabilityContainer(version: cc[1], dataAreaSize: Int(cc[2]) * 8, access: cc[3]))
    }
}
