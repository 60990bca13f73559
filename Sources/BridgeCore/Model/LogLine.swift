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
                $0 == " " || $0 == "\"" || $0 == "=" || $0.value < 0x20 || $0.value == 0x7F
            }
        if !needsQuotes { return value }
        // A JSON string literal is a valid quoted logfmt value (Go's strconv.Unquote, which logfmt readers use,
        // reads it back), so the log and the JSON output share one escaper.
        var out = ""
        JSONValue.writeString(value, to: &out)
        return out
    }

    /// `text` with every occurrence of each secret replaced by `[redacted]`. Secrets shorter than 4 characters
    /// are ignored (they would redact ordinary words).
    public static func redact(_ text: String, secrets: [String]) -> String {
        var out = text
        for secret in secrets where secret.count >= 4 && out.contains(secret) {
            out = out.replacingOccurrences(of: secret, with: "[redacted]")
        }
        return out
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = self[...]
        while let range = rest.range(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        result += rest
        return result
    }
}

extension Substring {
    fileprivate func range(of target: String) -> Range<Substring.Index>? {
        guard let first = target.first else { return nil }
        var index = startIndex
        while index < endIndex {
            if self[index] == first, self[index...].hasPrefix(target) {
                return index..<self.index(index, offsetBy: target.count)
            }
            index = self.index(after: index)
        }
        return nil
    }
}
