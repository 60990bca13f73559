/// The JSON grammar of RFC 8259 (the ABNF of sections 2 to 7, and UTF-8 from section 8.1) as a plain
/// recognizer: the outside authority the parser and config tests compare against. It is written from the RFC,
/// independently of `JSONParser`, and only answers "is this a JSON text": no values, and none of the limits
/// section 9 allows a parser to set (depth, number range).
public enum RFC8259Grammar {
    public static func matches(_ bytes: [UInt8]) -> Bool {
        guard String(validating: bytes, as: UTF8.self) != nil else { return false }
        var cursor = Cursor(bytes: bytes)
        // JSON-text = ws value ws
        cursor.whitespace()
        guard cursor.value() else { return false }
        cursor.whitespace()
        return cursor.index == bytes.count
    }

    private struct Cursor {
        let bytes: [UInt8]
        var index = 0

        var next: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func take(_ byte: UInt8) -> Bool {
            guard next == byte else { return false }
            index += 1
            return true
        }

        // ws = *( %x20 / %x09 / %x0A / %x0D )
        mutating func whitespace() {
            while let c = next, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { index += 1 }
        }

        // value = false / null / true / object / array / number / string
        mutating func value() -> Bool {
            guard let c = next else { return false }
            switch c {
            case 0x7B: return object()
            case 0x5B: return array()
            case 0x22: return string()
            case 0x2D, 0x30...0x39: return number()
            default: return literal("false") || literal("null") || literal("true")
            }
        }

        mutating func literal(_ word: String) -> Bool {
            guard bytes[index...].starts(with: word.utf8) else { return false }
            index += word.utf8.count
            return true
        }

        // object = begin-object [ member *( value-separator member ) ] end-object
        // member = string name-separator value; the separators carry ws on both sides.
        mutating func object() -> Bool {
            index += 1
            whitespace()
            if take(0x7D) { return true }
            while true {
                guard string() else { return false }
                whitespace()
                guard take(0x3A) else { return false }
                whitespace()
                guard value() else { return false }
                whitespace()
                if take(0x7D) { return true }
                guard take(0x2C) else { return false }
                whitespace()
            }
        }

        // array = begin-array [ value *( value-separator value ) ] end-array
        mutating func array() -> Bool {
            index += 1
            whitespace()
            if take(0x5D) { return true }
            while true {
                guard value() else { return false }
                whitespace()
                if take(0x5D) { return true }
                guard take(0x2C) else { return false }
                whitespace()
            }
        }

        // number = [ minus ] int [ frac ] [ exp ]; int = zero / ( digit1-9 *DIGIT ); frac = "." 1*DIGIT;
        // exp = ("e" / "E") [ minus / plus ] 1*DIGIT
        mutating func number() -> Bool {
            _ = take(0x2D)
            if !take(0x30) {
                guard digits(first: 0x31) else { return false }
            }
            if take(0x2E) {
                guard digits(first: 0x30) else { return false }
            }
            if take(0x65) || take(0x45) {
                _ = take(0x2D) || take(0x2B)
                guard digits(first: 0x30) else { return false }
            }
            return true
        }

        /// One digit from `first` to 9, then any digits.
        mutating func digits(first: UInt8) -> Bool {
            guard let c = next, (first...0x39).contains(c) else { return false }
            while let c = next, (0x30...0x39).contains(c) { index += 1 }
            return true
        }

        // string = quotation-mark *char quotation-mark
        // char = unescaped / escape ( %x22 / %x5C / %x2F / %x62 / %x66 / %x6E / %x72 / %x74 / %x75 4HEXDIG )
        // unescaped = %x20-21 / %x23-5B / %x5D-10FFFF
        mutating func string() -> Bool {
            guard take(0x22) else { return false }
            while let c = next {
                index += 1
                switch c {
                case 0x22:
                    return true
                case 0x5C:
                    guard let escaped = next else { return false }
                    index += 1
                    switch escaped {
                    case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74:
                        continue
                    case 0x75:
                        // HEXDIG: ABNF quoted letters are case-insensitive (RFC 5234), so A-F and a-f.
                        for _ in 0..<4 {
                            guard let h = next,
                                (0x30...0x39).contains(h) || (0x41...0x46).contains(h) || (0x61...0x66).contains(h)
                            else { return false }
                            index += 1
                        }
                    default:
                        return false
                    }
                case 0x00..<0x20:
                    return false
                default:
                    continue
                }
            }
            return false
        }
    }
}
