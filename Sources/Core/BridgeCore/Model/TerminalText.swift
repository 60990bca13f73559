/// Makes outside text (a scan, a tag's URI, a reader or scanner name, an API error) safe to print on a terminal.
///
/// Every control character is shown as a visible escape, so a hostile read cannot start a new row, move the
/// cursor, recolour the screen or set the window title. The form is Python's string `repr` (one convention,
/// documented in docs/operations.md):
///
/// | character | shown as |
/// |---|---|
/// | `\` (the escape character itself) | `\\` |
/// | newline, carriage return, tab | `\n`, `\r`, `\t` |
/// | other C0 controls U+0000-U+001F, DEL U+007F, C1 controls U+0080-U+009F | `\xHH` (the code point, 2 hex digits) |
///
/// Everything else, including non-ASCII letters, is shown as it is. Text without controls or backslashes comes
/// back unchanged, so lines built from our own words are not affected. Machine output (`--json`) is never
/// passed through this: JSON escaping keeps it exact.
public enum TerminalText {
    /// `text` with control characters and backslashes escaped, as in the table above.
    public static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: #"\\"#.unicodeScalars)
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            case let c where isControl(c):
                let hex = String(c.value, radix: 16)
                out.append(contentsOf: (#"\x"# + (hex.count < 2 ? "0" : "") + hex).unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    /// C0 controls, DEL and C1 controls: the characters a terminal may act on instead of showing.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool { scalar == "\\" || isControl(scalar) }
}
