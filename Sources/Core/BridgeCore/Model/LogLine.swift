/// Formats one log event as `level=... msg="..." key=value ...` (logfmt), the only log format we write.
///
/// Values with spaces, quotes or `=` are quoted and escaped so a line always parses back into the same pairs;
/// control characters are escaped so a hostile tag or API reply cannot forge extra log lines.
public enum LogLine {
    public static func format(level: String, message: String, fields: [(String, String)]) -> String {
        var line = "level=" + level + " msg=" + quote(message)
        for (key, value) in fields {
            line += " " + key + "=" + quote(value)
        }
        return line
    }

    static func quote(_ value: String) -> String {
        let needsQuotes =
            value.isEmpty
            || value.unicodeScalars.contains {
                $0 == " " || $0 == "\"" || $0 == "=" || TerminalText.isControl($0)
            }
        if !needsQuotes { return value }
        // A JSON string literal is a valid quoted logfmt value (Go's strconv.Unquote, which logfmt readers use,
        // reads it back), so the log and the JSON output share one escaper.
        var out = ""
        JSONValue.writeString(value, to: &out)
        return out
    }

    /// `text` with every occurrence of each secret replaced by `[redacted]`, in each of its `spellings`.
    /// Secrets shorter than 4 characters are ignored (they would redact ordinary words); tokens are refused
    /// below `APIToken.minimumLength` long before they get here.
    public static func redact(_ text: String, secrets: [String]) -> String {
        var out = text
        for secret in secrets where secret.count >= 4 {
            for spelling in spellings(of: secret) where out.contains(spelling) {
                out = out.replacing(spelling, with: "[redacted]")
            }
        }
        return out
    }

    /// The ways a secret can be spelled in text we keep or print: as it is, and as the inside of a JSON string
    /// (our own log quoting, an API echoing it in an error body) with `"` and `\` escaped, optionally `/` as
    /// `\/`, and `<`, `>`, `&` as `\u003c`-style escapes the way HTML-safe encoders write them.
    public static func spellings(of secret: String) -> [String] {
        var minimal = ""
        var slashes = ""
        var htmlSafe = ""
        for scalar in secret.unicodeScalars {
            var escaped = ""
            JSONValue.writeString(String(scalar), to: &escaped)
            let inner = String(escaped.dropFirst().dropLast())
            minimal += inner
            slashes += scalar == "/" ? "\\/" : inner
            switch scalar {
            case "/": htmlSafe += "\\/"
            case "<": htmlSafe += "\\u003c"
            case ">": htmlSafe += "\\u003e"
            case "&": htmlSafe += "\\u0026"
            default: htmlSafe += inner
            }
        }
        var result = [secret]
        for form in [minimal, slashes, htmlSafe] where !result.contains(form) { result.append(form) }
        return result
    }
}
