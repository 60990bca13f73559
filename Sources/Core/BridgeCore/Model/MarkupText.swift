/// Outside text for HTML and XML (the reports, the calibration sheet's SVG): `&`, `<`, `>` and both quotes as
/// entities, so it is fit for content and attribute values alike; the control characters XML 1.0 cannot carry
/// (all C0 but tab and newline, DEL and C1, U+FFFE, U+FFFF) become U+FFFD.
public enum MarkupText {
    /// A number for an SVG or XML attribute: at most three decimals, none for a whole number.
    public static func number(_ value: Double) -> String {
        let rounded = (value * 1000).rounded() / 1000
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int(rounded)) : String(rounded)
    }

    public static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n": out.unicodeScalars.append(scalar)
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0xFFFE
                    || scalar.value == 0xFFFF
                {
                    out += "\u{FFFD}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
