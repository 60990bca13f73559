/// Upper-case hex formatting for log lines and error messages (no Foundation formatting needed).
enum NFCHex {
    private static let digits = Array("0123456789ABCDEF")

    /// Two hex digits.
    static func byte(_ value: UInt8) -> String {
        String([digits[Int(value >> 4)], digits[Int(value & 0x0F)]])
    }

    /// Four hex digits (status words, file ids, card names).
    static func word(_ value: UInt16) -> String {
        byte(UInt8(value >> 8)) + byte(UInt8(value & 0xFF))
    }

    /// Bytes as hex, separated by `separator` (`"04 A1 B2"`).
    static func bytes(_ values: some Sequence<UInt8>, separator: String = " ") -> String {
        values.map(byte).joined(separator: separator)
    }
}
