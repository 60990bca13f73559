/// The one-letter transport code in a Plings URL (`t=`).
public enum TransportCode: String, Sendable, CaseIterable {
    case qr = "q"
    case nfc = "n"
    case rfid = "r"
    case barcode = "b"
}

/// A Plings identifier parsed from a tag or code URL (docs/contracts.md, "Plings URL").
public struct PlingsIdentifier: Sendable, Equatable {
    public var type: TransportCode
    /// The base58 object identifier (`i=`).
    public var identifier: String
    /// The dotted decimal path (`p=`), e.g. `4.2.3.3.6`.
    public var path: String
    /// The optional class pointer (`cp=`); nil when absent or empty.
    public var classPointer: String?

    public init(type: TransportCode, identifier: String, path: String, classPointer: String? = nil) {
        self.type = type
        self.identifier = identifier
        self.path = path
        self.classPointer = classPointer
    }
}

/// Parses Plings URLs: `http(s)://<accepted host>/?t=<type>&i=<identifier>&p=<path>[&cp=<classPointer>]`.
///
/// The parser is written by hand instead of using Foundation's `URLComponents` because its behaviour on
/// malformed input differs between platforms and releases, and every rejection here must carry a reason that
/// ends up in the spool. Everything that is not a valid Plings URL is an `UnrecognizedReason`, never a crash.
public struct PlingsURLParser: Sendable {
    /// Reads longer than this are rejected before any parsing (a scanner or tag has no business sending more).
    /// The only length bound: `i`, `p` and `cp` have none of their own (docs/contracts.md, "Plings URL", sets none).
    public static let maximumLength = 2048
    static let base58Alphabet = Set("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz".utf8)

    /// Accepted hosts, lower-cased.
    public let hosts: Set<String>

    public init(hosts: [String] = ["s.plings.io"]) {
        self.hosts = Set(hosts.map { $0.lowercased() })
    }

    /// Parses `raw` (surrounding whitespace ignored) into an identifier or the reason it is not one.
    public func parse(_ raw: String) -> Result<PlingsIdentifier, UnrecognizedReason> {
        let text = raw.trimmingASCIIWhitespace()
        if text.isEmpty { return .failure(.empty) }
        let bytes = Array(text.utf8)
        if bytes.count > PlingsURLParser.maximumLength { return .failure(.tooLong(bytes.count)) }

        // Scheme.
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            bytes[colon...].starts(with: Array("://".utf8))
        else { return .failure(.notAURL) }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        guard scheme == "https" || scheme == "http" else { return .failure(.unsupportedScheme(scheme)) }
        // A URL has no control characters (RFC 3986); a NUL inside one is a broken tag, not padding (trailing NUL
        // padding never gets here: NDEFURI drops it, and surrounding whitespace and NULs are trimmed above).
        if let bad = text.unicodeScalars.enumerated().first(where: { TerminalText.isControl($0.element) }) {
            let offset = text.unicodeScalars.prefix(bad.offset).reduce(0) { $0 + UTF8.width($1) }
            return .failure(.controlCharacter(bad.element.value, byte: offset + 1))
        }

        // Authority: everything up to the first '/', '?' or '#'.
        let authorityStart = colon + 3
        var cursor = authorityStart
        while cursor < bytes.count, ![UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[cursor]) {
            cursor += 1
        }
        let authority = bytes[authorityStart..<cursor]
        if authority.contains(UInt8(ascii: "@")) { return .failure(.notAURL) }
        var hostBytes = authority
        if let portColon = authority.lastIndex(of: UInt8(ascii: ":")) {
            let port = authority[(portColon + 1)...]
            guard !port.isEmpty, port.count <= 5, port.allSatisfy({ (48...57).contains($0) }),
                let number = Int(String(decoding: port, as: UTF8.self)), (1...65_535).contains(number)
            else {
                return .failure(.notAURL)
            }
            hostBytes = authority[..<portColon]
        }
        var host = String(decoding: hostBytes, as: UTF8.self).lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        guard hosts.contains(host) else { return .failure(.hostNotAccepted(host)) }

        // Path: only the root is a Plings URL.
        let pathStart = cursor
        while cursor < bytes.count, bytes[cursor] != UInt8(ascii: "?"), bytes[cursor] != UInt8(ascii: "#") {
            cursor += 1
        }
        let path = bytes[pathStart..<cursor]
        guard path.isEmpty || Array(path) == [UInt8(ascii: "/")] else {
            return .failure(.unexpectedPath(String(decoding: path, as: UTF8.self)))
        }

        // Query, up to an (ignored) fragment.
        guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: "?") else { return .failure(.missingParameter("i")) }
        let queryStart = cursor + 1
        let queryEnd = bytes[queryStart...].firstIndex(of: UInt8(ascii: "#")) ?? bytes.count
        var parameters: [String: String] = [:]
        for pair in bytes[queryStart..<queryEnd].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "=")) ?? pair.endIndex
            guard let key = PlingsURLParser.percentDecode(pair[pair.startIndex..<equals]),
                let value = PlingsURLParser.percentDecode(equals < pair.endIndex ? pair[(equals + 1)...] : [][...])
            else { return .failure(.badPercentEncoding) }
            // Only our own keys must be unique: a repeated `i` is ambiguous, a repeated tracking tag is not ours.
            if ["t", "i", "p", "cp"].contains(key), parameters[key] != nil {
                return .failure(.duplicateParameter(key))
            }
            parameters[key] = value
        }

        guard let typeText = parameters["t"] else { return .failure(.missingParameter("t")) }
        guard let type = TransportCode(rawValue: typeText) else { return .failure(.badType(typeText)) }
        guard let identifier = parameters["i"], !identifier.isEmpty else { return .failure(.missingParameter("i")) }
        guard identifier.utf8.allSatisfy({ PlingsURLParser.base58Alphabet.contains($0) }) else {
            return .failure(.badIdentifier)
        }
        guard let pathValue = parameters["p"], !pathValue.isEmpty else { return .failure(.missingParameter("p")) }
        guard PlingsURLParser.isDottedDecimal(pathValue) else { return .failure(.badPath(pathValue)) }
        var classPointer = parameters["cp"]
        if classPointer?.isEmpty == true { classPointer = nil }
        if let cp = classPointer {
            guard cp.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return .failure(.badClassPointer) }
        }
        return .success(
            PlingsIdentifier(type: type, identifier: identifier, path: pathValue, classPointer: classPointer))
    }

    static func isDottedDecimal(_ text: String) -> Bool {
        let components = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return components.allSatisfy { !$0.isEmpty && $0.allSatisfy { (48...57).contains($0) } }
    }

    /// Decodes `%XX` escapes; nil on a broken escape or when the result is not UTF-8.
    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else {
                    return nil
                }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(b)
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }
}

/// Why a read is not a Plings URL. The description is what the spool keeps in `last_error`.
public enum UnrecognizedReason: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case tooLong(Int)
    case notAURL
    case unsupportedScheme(String)
    case hostNotAccepted(String)
    case unexpectedPath(String)
    case badPercentEncoding
    case duplicateParameter(String)
    case missingParameter(String)
    case badType(String)
    case badIdentifier
    case badPath(String)
    case badClassPointer
    /// A control character (code point, 1-based byte offset) inside a URL, e.g. a NUL from a broken tag.
    case controlCharacter(UInt32, byte: Int)
    /// The tag or device gave no URL at all (blank tag, no NDEF, no URI record): the reason comes from the source.
    case noURL(String)

    public var description: String {
        switch self {
        case .empty: return "empty read"
        case .tooLong(let n): return "read is \(n) bytes, longer than \(PlingsURLParser.maximumLength)"
        case .notAURL: return "not a URL"
        case .unsupportedScheme(let s): return "scheme '\(s.prefix(16))' is not http or https"
        case .hostNotAccepted(let h): return "host '\(h.prefix(64))' is not an accepted Plings host"
        case .unexpectedPath(let p): return "unexpected URL path '\(p.prefix(64))'"
        case .badPercentEncoding: return "malformed percent-encoding"
        case .duplicateParameter(let k): return "parameter '\(k)' appears more than once"
        case .missingParameter(let k): return "missing parameter '\(k)'"
        case .badType(let t): return "transport type '\(t.prefix(8))' is not one of q, n, r, b"
        case .badIdentifier: return "identifier 'i' is not base58"
        case .badPath(let p): return "path 'p=\(p.prefix(64))' is not dotted decimal numbers"
        case .badClassPointer: return "class pointer 'cp' has characters other than visible ASCII"
        case .controlCharacter(let value, let byte):
            let hex = String(value, radix: 16, uppercase: true)
            let name =
                value == 0 ? "a NUL" : "the control character U+" + String(repeating: "0", count: 4 - hex.count) + hex
            return "URL contains \(name) at byte \(byte)"
        case .noURL(let why): return why
        }
    }
}

extension String {
    /// The string without leading and trailing ASCII whitespace and control characters (CR, LF, tab, NUL...).
    public func trimmingASCIIWhitespace() -> String {
        let u = Array(utf8)
        var start = 0
        var end = u.count
        while start < end, u[start] <= 0x20 { start += 1 }
        while end > start, u[end - 1] <= 0x20 { end -= 1 }
        if start == 0 && end == u.count { return self }
        return String(decoding: u[start..<end], as: UTF8.self)
    }
}
