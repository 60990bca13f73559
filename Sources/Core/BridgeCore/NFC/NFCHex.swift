/// The one hex formatter: upper case for log lines, error messages and ATRs, lower case for UIDs as the spool
/// stores them (docs/contracts.md, "Spool record").
public enum NFCHex {
    private static let digits = Array("0123456789ABCDEF")

    /// Two hex digits.
    public static func byte(_ value: UInt8) -> String {
        String([digits[Int(value >> 4)], digits[Int(value & 0x0F)]])
    }

    /// Four hex digits (status words, file ids, card names).
    public static func word(_ value: UInt16) -> String {
        byte(UInt8(value >> 8)) + byte(UInt8(value & 0xFF))
    }

    /// Bytes as hex, separated by `separator` (`"04 A1 B2"`).
    public static func bytes(_ values: some Sequence<UInt8>, separator: String = " ") -> String {
        values.map(byte).joined(separator: separator)
    }

    /// Lower-case hex without separators (`04a1b2`): a tag UID as the spool and `status` show it.
    public static func uid(_ values: some Sequence<UInt8>) -> String {
        bytes(values, separator: "").lowercased()
    }
}
