/// Why a JSON text could not be parsed, with the byte offset where it went wrong.
public struct JSONParseError: Error, Equatable, CustomStringConvertible {
    public let offset: Int
    public let message: String
    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

/// A strict RFC 8259 JSON parser over UTF-8 bytes.
///
/// It parses bytes from outside (config files, API replies), so it is bounded: nesting depth is capped
/// (deep nesting would otherwise exhaust the stack) and every index is checked. Duplicate object keys are kept
/// in order; callers that care (the config loader) reject them.
public struct JSONParser {
    public static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes)
        // A UTF-8 byte order mark is tolerated: some editors write one into config files.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the value") }
        return value
    }

    private func error(_ message: String) -> JSONParseError { JSONParseError(offset: index, message: message) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let c = current, c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
    }

    private mutating func expect(_ literal: String, value: JSONValue) throws(JSONParseError) -> JSONValue {
        let expected = Array(literal.utf8)
        guard index + expected.count <= bytes.count else { throw error("truncated literal") }
        guard bytes[index..<(index + expected.count)].elementsEqual(expected) else { throw error("unknown literal") }
        index += expected.count
        return value
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < JSONParser.maximumDepth else { throw error("nesting deeper than \(JSONParser.maximumDepth)") }
        guard let c = current else { throw error("unexpected end of input") }
        switch c {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expect("true", value: .bool(true))
        case UInt8(ascii: "f"): return try expect("false", value: .bool(false))
        case UInt8(ascii: "n"): return try expect("null", value: .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        index += 1
        var members: [(String, JSONValue)] = []
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            members.append((key, try parseValue(depth: depth + 1)))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: throw error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(items)
            default: throw error("expected ',' or ']'")
            }
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("bad hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        var scalars = String.UnicodeScalarView()
        var runStart = index
        /// The unescaped run from `runStart` to `end`, checked as UTF-8.
        func run(to end: Int) throws(JSONParseError) -> String {
            guard let text = String(validating: bytes[runStart..<end], as: UTF8.self) else {
                throw JSONParseError(offset: runStart, message: "invalid UTF-8 in string")
            }
            return text
        }
        func flushRun(_ end: Int) throws(JSONParseError) {
            guard runStart < end else { return }
            scalars.append(contentsOf: try run(to: end).unicodeScalars)
        }
        while true {
            guard let c = current else { throw error("unterminated string") }
            if c == UInt8(ascii: "\"") {
                defer { index += 1 }
                // No escape in the string (the common case): its bytes are the string.
                if scalars.isEmpty { return try run(to: index) }
                try flushRun(index)
                return String(scalars)
            }
            if c < 0x20 { throw error("control character in string") }
            if c != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            try flushRun(index)
            index += 1
            guard let escape = current else { throw error("unterminated escape") }
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800..<0xDC00).contains(code) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else { throw error("lone surrogate in \\u escape") }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("bad low surrogate") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("invalid code point in \\u escape") }
                scalars.append(scalar)
            default: throw error("unknown escape")
            }
            runStart = index
        }
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw error("expected a digit")
        }
        if first == UInt8(ascii: "0") {
            index += 1
        } else {
            while let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { index += 1 }
        }
        if current == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digitsStart = index
            while let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { index += 1 }
            guard index > digitsStart else { throw error("expected a digit after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while let c = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { index += 1 }
            guard index > digitsStart else { throw error("expected a digit in the exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let value = Int(text) { return .integer(value) }
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError(offset: start, message: "number out of range")
        }
        return .number(value)
    }
}
