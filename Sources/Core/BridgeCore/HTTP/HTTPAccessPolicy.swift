import Foundation

/// Who may ask the local HTTP interface what (docs/contracts.md, "Local HTTP interface"). Pure: the server hands
/// in what the request says and acts on the verdict.
///
/// - Read-only: GET and HEAD everywhere, POST only to `/login` and `/logout`; nothing else changes state, so there
///   is no cross-site request to forge (and the session cookie is `SameSite=Strict`: another site's form carries
///   none, so it cannot sign a browser out either).
/// - Without a token the listener is on loopback, and a request must name a loopback host: a web page elsewhere
///   that points a name of its own at 127.0.0.1 (DNS rebinding) is refused, so it cannot read the scans.
/// - With a token every request presents it, `Authorization: Bearer TOKEN`, or the cookie of a live session the
///   sign-in form began (a browser's `EventSource` cannot send headers; `SessionTable`). A page request without
///   either is sent to the form.
public struct HTTPAccessPolicy: Sendable {
    /// nil: no token configured (loopback only).
    public let token: String?
    /// The session cookie gets `Secure` when the interface is served over TLS.
    public let tls: Bool

    public static let cookieName = "plings_session"
    /// What the sign-in form needs before the token is known: the form, the page's style and script (no data);
    /// and signing out, which ends only the session its own cookie names.
    public static let publicPaths: Set<String> = ["/login", "/logout", "/app.css", "/app.js"]
    /// Paths that take a POST (a form's).
    public static let formPaths: Set<String> = ["/login", "/logout"]

    public init(token: String?, tls: Bool) {
        self.token = token
        self.tls = tls
    }

    public enum Verdict: Sendable, Equatable {
        case allowed
        /// A browser asked for the page without the token: 303 to `/login`.
        case login
        /// 401, `WWW-Authenticate: Bearer`.
        case unauthorized
        /// 403: a host name that is not loopback on a listener without a token.
        case foreignHost
        /// 405: a method that could change something.
        case methodNotAllowed
        /// 400: a Host that is not `host[:port]` as RFC 9110 section 7.2 (RFC 3986 section 3.2.2) spells one.
        case badHost
    }

    /// The verdict for one request. `host` is the Host header, `authorization` the Authorization header,
    /// `session` whether its session cookie names a live session.
    public func verdict(method: String, path: String, host: String?, authorization: String?, session: Bool)
        -> Verdict
    {
        if let host, Self.hostName(host) == nil { return .badHost }
        guard method == "GET" || method == "HEAD" || (method == "POST" && Self.formPaths.contains(path)) else {
            return .methodNotAllowed
        }
        guard let token else {
            if let host, !Self.isLoopbackHost(host) { return .foreignHost }
            return .allowed
        }
        if Self.publicPaths.contains(path) { return .allowed }
        // The scheme is case-insensitive (RFC 9110 section 11.1); the token is not.
        if let authorization, authorization.utf8.count > 7, authorization.prefix(7).lowercased() == "bearer ",
            Self.constantTimeEqual(Array(authorization.utf8.dropFirst(7)), Array(token.utf8))
        {
            return .allowed
        }
        if session { return .allowed }
        return path == "/" ? .login : .unauthorized
    }

    /// Whether a submitted token (the login form's) is the configured one.
    public func accepts(_ submitted: String) -> Bool {
        guard let token else { return false }
        return Self.constantTimeEqual(Array(submitted.utf8), Array(token.utf8))
    }

    /// The `Set-Cookie` value after a good sign-in: the session's id in hex, for `lifetime` seconds, only for this
    /// site's requests, never readable by scripts, only over TLS when the interface has it.
    public func sessionCookie(id: [UInt8], lifetime: Double) -> String {
        "\(Self.cookieName)=\(Self.hex(id)); Path=/; Max-Age=\(Int(lifetime)); HttpOnly; SameSite=Strict"
            + (tls ? "; Secure" : "")
    }

    /// The `Set-Cookie` value that signs a browser out: the cookie emptied and expired at once.
    public func endedSessionCookie() -> String {
        "\(Self.cookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict" + (tls ? "; Secure" : "")
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    /// `127.0.0.1`, `127.0.0.1:8731`, `[::1]:8731`, `localhost:8731`.
    public static func isLoopbackHost(_ header: String) -> Bool {
        guard let host = hostName(header) else { return false }
        return LoopbackHost.contains(host)
    }

    /// The host of a Host header, `uri-host [ ":" port ]` (RFC 9110 section 7.2): an IP literal in brackets, or a
    /// reg-name of unreserved characters, sub-delims and percent-encodings (RFC 3986 section 3.2.2, which also
    /// covers IPv4), then an optional port of digits only. Nil when the header is anything else: `@`, `/`, a
    /// second `]` or a port with letters never pass as a loopback name followed by something.
    public static func hostName(_ header: String) -> String? {
        var rest = Substring(header)
        let host: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
            rest = rest[rest.index(after: close)...]
        } else {
            let end = rest.firstIndex(of: ":") ?? rest.endIndex
            host = rest[..<end]
            let allowed = Set("-._~!$&'()*+,;=%")
            guard !host.isEmpty,
                host.unicodeScalars.allSatisfy({
                    $0.isASCII && (CharacterSet.alphanumerics.contains($0) || allowed.contains(Character($0)))
                })
            else { return nil }
            rest = rest[end...]
        }
        if !rest.isEmpty {
            guard rest.first == ":", rest.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        }
        return String(host)
    }

    /// Compares without stopping at the first difference, so the time taken says nothing of how much matched.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return difference == 0
    }

    /// The bytes a session cookie's hex names; nil for anything that is not an id's hex.
    public static func fromHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, digits.count <= 2 * SessionTable.idBytes else { return nil }
        var bytes: [UInt8] = []
        var i = 0
        while i < digits.count {
            guard let high = hexValue(digits[i]), let low = hexValue(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
            i += 2
        }
        return bytes
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// `application/x-www-form-urlencoded` (the URL Standard, section 5.1): name=value pairs split on `&`, `+` for a
/// space, percent-encoded bytes as UTF-8 (invalid sequences replaced).
public enum FormURLEncoded {
    public static func value(of name: String, in body: [UInt8]) -> String? {
        for pair in body.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            if decode(parts[0]) == name { return parts.count > 1 ? decode(parts[1]) : "" }
        }
        return nil
    }

    static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if c == UInt8(ascii: "%"), i + 2 < bytes.endIndex,
                case let pair = bytes[(i + 1)...(i + 2)], pair.allSatisfy({ Character(Unicode.Scalar($0)).isHexDigit }),
                let byte = UInt8(String(decoding: pair, as: UTF8.self), radix: 16)
            {
                out.append(byte)
                i += 2
            } else {
                out.append(c)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}
