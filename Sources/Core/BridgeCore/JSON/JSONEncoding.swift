extension JSONValue {
    /// Compact JSON text (no spaces), keys in insertion order.
    ///
    /// Doubles use Swift's shortest round-trip spelling (`59.3293`, `8.0`), which is also what the Plings iOS
    /// app's encoder produces for the same values. Non-finite doubles cannot be represented and become `null`.
    public func encoded() -> String {
        var out = ""
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .number(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                JSONValue.writeString(key, to: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        // Most strings (ids, timestamps, identifiers) need no escape at all: one look at their UTF-8, then one append.
        // 0xC2 leads U+0080...U+00BF, the C1 controls among them: such strings take the scalar-by-scalar path.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F || $0 == 0xC2 }) {
            out += s
            out += "\""
            return
        }
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            // C1 controls too: JSON allows them raw, but a terminal may act on them (U+009B is CSI).
            case let c where TerminalText.isControl(c):
                let hex = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
