import Foundation
import Testing

@testable import BridgeCore

/// The local HTTP interface's pure rules against their outside authorities: server-sent events framing (the HTML
/// Living Standard, section 9.2 "Server-sent events"), IP address text (RFC 4291 section 2.2, RFC 791), form
/// bodies (the URL Standard, section 5 "application/x-www-form-urlencoded"), and the access rules of issue 25
/// (read-only; loopback names only without a token; the token as a bearer header or the login cookie).
struct HTTPInterfaceRulesTests {
    // MARK: server-sent events

    /// The standard's stock-ticker example (9.2.4): three data lines make one event whose data is the three lines
    /// joined by LF.
    @Test func aMultiLinePayloadIsOneDataLinePerLine() {
        #expect(ServerSentEvents.event(data: "YHOO\n+2\n10") == "data: YHOO\ndata: +2\ndata: 10\n\n")
    }

    /// The standard's id example (9.2.4): `id:` before the data, and the event ends with a blank line.
    @Test func theIDComesBeforeTheData() {
        #expect(ServerSentEvents.event(id: "1", data: "first event") == "id: 1\ndata: first event\n\n")
        #expect(
            ServerSentEvents.event(event: "status", data: "{}") == "event: status\ndata: {}\n\n")
    }

    /// A line may end in CR, LF or CRLF (9.2.5): a CR in the payload must start a new data line too, or a client
    /// would read what follows it as a field of its own.
    @Test func carriageReturnsCannotForgeFields() {
        #expect(ServerSentEvents.event(data: "a\rid: 99\r\nb") == "data: a\ndata: id: 99\ndata: b\n\n")
        #expect(ServerSentEvents.event(id: "7\nevent: x", data: "d") == "id: 7event: x\ndata: d\n\n")
        #expect(ServerSentEvents.comment("a\nb") == ": ab\n\n")
        #expect(ServerSentEvents.retry(milliseconds: 1000) == "retry: 1000\n\n")
    }

    @Test func aSequenceIsAWholeNumberOrNothing() {
        #expect(ServerSentEvents.sequence("42") == 42)
        #expect(ServerSentEvents.sequence("0") == 0)
        for foreign in [nil, "", "-1", "4 2", "x", "1e3", "99999999999999999999"] {
            #expect(ServerSentEvents.sequence(foreign) == nil)
        }
    }

    // MARK: listen addresses

    /// RFC 4291 section 2.2: the preferred, compressed and mixed text forms.
    @Test(arguments: [
        "2001:DB8:0:0:8:800:200C:417A", "2001:DB8::8:800:200C:417A", "FF01::101", "::1", "::", "::13.1.68.3",
        "::FFFF:129.144.52.38", "0:0:0:0:0:0:13.1.68.3", "fe80::",
    ])
    func rfc4291TextFormsAreIPv6(_ text: String) {
        #expect(IPAddressText.isIPv6(text))
    }

    @Test(arguments: ["2001:db8::1::2", "12345::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", ":1", "g::1", "::1.2.3"])
    func malformedIPv6IsRefused(_ text: String) {
        #expect(!IPAddressText.isIPv6(text))
    }

    @Test func listenAddressesParseAndSayWhatIsWrong() throws {
        #expect(try ListenAddress.parse("127.0.0.1:8731").get() == ListenAddress(host: "127.0.0.1", port: 8731))
        #expect(try ListenAddress.parse("[::1]:8731").get() == ListenAddress(host: "::1", port: 8731))
        #expect(try ListenAddress.parse("0.0.0.0:80").get().isLoopback == false)
        #expect(try ListenAddress.parse("127.0.0.9:80").get().isLoopback)
        #expect(try ListenAddress.parse("[::1]:80").get().description == "[::1]:80")
        for (text, says) in [
            ("localhost:8731", "not a numeric IPv4 address"), ("127.0.0.1", "needs a port"),
            ("127.0.0.1:0", "from 1 to 65535"), ("127.0.0.1:70000", "from 1 to 65535"),
            ("::1:8731", "not a numeric IPv4"), ("[::1]", "brackets with a port"), ("256.0.0.1:1", "not a numeric"),
        ] {
            guard case .failure(let error) = ListenAddress.parse(text) else {
                Issue.record("\(text) parsed")
                continue
            }
            #expect(error.description.contains(says), "\(text): \(error)")
        }
    }

    // MARK: form bodies

    /// The URL Standard's parser: `+` is a space, percent-escapes are bytes decoded as UTF-8, a name without `=`
    /// has the empty value, a stray `%` stays.
    @Test func formBodiesDecodeAsTheURLStandardSays() {
        let body = Array("a=1&token=p%C3%A5+ss%2B%3D&flag&bad=%zz%4".utf8)
        #expect(FormURLEncoded.value(of: "token", in: body) == "på ss+=")
        #expect(FormURLEncoded.value(of: "flag", in: body) == "")
        #expect(FormURLEncoded.value(of: "bad", in: body) == "%zz%4")
        #expect(FormURLEncoded.value(of: "missing", in: body) == nil)
        #expect(FormURLEncoded.value(of: "x", in: Array("x=%+f".utf8)) == "% f")
    }

    // MARK: access

    @Test func withoutATokenOnlyLoopbackNamesAndReadsAreAnswered() {
        let open = HTTPAccessPolicy(token: nil, tls: false)
        func verdict(_ method: String, _ path: String, host: String?) -> HTTPAccessPolicy.Verdict {
            open.verdict(method: method, path: path, host: host, authorization: nil, session: false)
        }
        for host in ["127.0.0.1:8731", "127.0.0.1", "localhost:8731", "[::1]:8731", "LOCALHOST", nil] {
            #expect(verdict("GET", "/events", host: host) == .allowed, "\(host ?? "no Host")")
        }
        // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
        for host in ["rebind.example:8731", "127.0.0.1.nip.io:8731", "192.168.1.5:8731", "[::2]:8731"] {
            #expect(verdict("GET", "/scans", host: host) == .foreignHost, "\(host)")
        }
        for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            #expect(verdict(method, "/status", host: "127.0.0.1") == .methodNotAllowed)
        }
        #expect(verdict("HEAD", "/", host: "127.0.0.1") == .allowed)
    }

    /// Host is `uri-host [ ":" port ]` (RFC 9110 section 7.2; RFC 3986 section 3.2.2): anything else is 400 before
    /// the loopback check, so no suffix or userinfo rides on a loopback name.
    @Test func aHostHeaderIsAHostAndAnOptionalPort() {
        for (header, host) in [
            ("127.0.0.1", "127.0.0.1"), ("127.0.0.1:8731", "127.0.0.1"), ("[::1]:8731", "::1"), ("[::1]", "::1"),
            ("localhost", "localhost"), ("gate7.example:443", "gate7.example"), ("127.0.0.1:", "127.0.0.1"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ] {
            #expect(HTTPAccessPolicy.hostName(header) == host, "\(header)")
        }
        for header in [
            "", "127.0.0.1:1@evil.example", "[::1].evil.example", "localhost:8731.evil.example", "127.0.0.1:abc",
            "127.0.0.1/x", "[::1", "a b", "127.0.0.1:80:80", "[]", "host\u{0}.evil",
        ] {
            #expect(HTTPAccessPolicy.hostName(header) == nil, "\(header)")
            let verdict = HTTPAccessPolicy(token: nil, tls: false).verdict(
                method: "GET", path: "/status", host: header, authorization: nil, session: false)
            #expect(verdict == .badHost, "\(header)")
        }
    }

    @Test func withATokenEveryRequestPresentsIt() {
        let token = "s3cret; with \"odd\" bytes=ø"
        let guarded = HTTPAccessPolicy(token: token, tls: true)
        func verdict(_ path: String, authorization: String? = nil, session: Bool = false) -> HTTPAccessPolicy.Verdict {
            guarded.verdict(
                method: "GET", path: path, host: "gate7.example:8731", authorization: authorization, session: session)
        }
        #expect(verdict("/status") == .unauthorized)
        #expect(verdict("/") == .login)
        #expect(verdict("/status", authorization: "Bearer " + token) == .allowed)
        #expect(verdict("/status", authorization: "Bearer " + token + "x") == .unauthorized)
        #expect(verdict("/status", authorization: "Bearer " + token.dropLast()) == .unauthorized)
        #expect(verdict("/status", authorization: "Basic " + token) == .unauthorized)
        // The scheme is case-insensitive (RFC 9110 section 11.1), the token is not.
        #expect(verdict("/status", authorization: "bearer " + token) == .allowed)
        #expect(verdict("/status", authorization: "bearer " + token.uppercased()) == .unauthorized)
        for path in ["/login", "/logout", "/app.css", "/app.js"] { #expect(verdict(path) == .allowed) }
        // A live session lets a browser's EventSource in.
        #expect(verdict("/events", session: true) == .allowed)
        #expect(guarded.accepts(token) && !guarded.accepts("s3cret"))
        // Any host name is fine with a token (the listener may be on the LAN), still read-only.
        #expect(
            guarded.verdict(method: "POST", path: "/login", host: "x", authorization: nil, session: false) == .allowed)
        #expect(
            guarded.verdict(method: "POST", path: "/logout", host: "x", authorization: nil, session: false) == .allowed)
        #expect(
            guarded.verdict(
                method: "POST", path: "/status", host: "x", authorization: "Bearer " + token, session: false)
                == .methodNotAllowed)
    }

    // MARK: sessions

    /// The cookie of a sign-in (OWASP's session management cheat sheet): a random id, not the token; only for this
    /// site's requests, never readable by scripts, Secure over TLS, with a Max-Age (RFC 6265 sections 4.1.1, 4.1.2;
    /// SameSite: RFC 6265bis); signing out sends it emptied with Max-Age=0 (RFC 6265 section 4.1.2.2).
    @Test func aSessionCookieCarriesARandomIdNotTheToken() {
        let token = "s3cret-token-0123456789"
        let guarded = HTTPAccessPolicy(token: token, tls: true)
        let id: [UInt8] = (0..<SessionTable.idBytes).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let cookie = guarded.sessionCookie(id: id, lifetime: 3600)
        let attributes = cookie.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        let value = String(attributes[0].dropFirst("plings_session=".count))
        #expect(attributes[0].hasPrefix("plings_session="))
        #expect(value.count == 2 * SessionTable.idBytes && value.allSatisfy(\.isHexDigit))
        #expect(HTTPAccessPolicy.fromHex(value) == id)
        #expect(
            !cookie.contains(token) && !value.contains(Array(token.utf8).map { String(format: "%02x", $0) }.joined()))
        #expect(Set(attributes.dropFirst()) == ["Path=/", "Max-Age=3600", "HttpOnly", "SameSite=Strict", "Secure"])
        #expect(!HTTPAccessPolicy(token: "t", tls: false).sessionCookie(id: id, lifetime: 60).contains("Secure"))
        let ended = guarded.endedSessionCookie()
        #expect(ended.hasPrefix("plings_session=;") && ended.contains("Max-Age=0"))
        // Only an id's hex is looked up: longer text, odd lengths and other characters are nothing.
        #expect(HTTPAccessPolicy.fromHex(value + "00") == nil)
        #expect(HTTPAccessPolicy.fromHex("abc") == nil && HTTPAccessPolicy.fromHex("zz") == nil)
    }

    @Test func aSessionLivesItsLifetimeUntilItEnds() {
        var table = SessionTable(lifetime: 100)
        let a = [UInt8](repeating: 1, count: SessionTable.idBytes)
        let b = [UInt8](repeating: 2, count: SessionTable.idBytes)
        table.begin(id: a, now: 1000)
        table.begin(id: b, now: 1050)
        #expect(table.isLive(id: a, now: 1099.9) && table.isLive(id: b, now: 1099.9))
        #expect(!table.isLive(id: a, now: 1100), "expired at sign-in + lifetime")
        #expect(table.isLive(id: b, now: 1149))
        #expect(!table.isLive(id: Array(a.dropLast()), now: 1000), "a prefix is not the id")
        var almost = a
        almost[SessionTable.idBytes - 1] ^= 1
        #expect(!table.isLive(id: almost, now: 1000))
        table.end(id: b)
        #expect(!table.isLive(id: b, now: 1060), "signed out")
        table.begin(id: b, now: 1060)
        table.endAll()
        #expect(!table.isLive(id: b, now: 1061) && table.count == 0, "a new token signs everyone out")
    }

    @Test func theOldestSessionGoesWhenTheTableIsFull() {
        var table = SessionTable(lifetime: 1000)
        let ids = (0...SessionTable.capacity).map { n in
            [UInt8](repeating: UInt8(n % 256), count: 31) + [UInt8(n / 256)]
        }
        for (n, id) in ids.enumerated() { table.begin(id: id, now: Double(n)) }
        #expect(table.count == SessionTable.capacity)
        #expect(!table.isLive(id: ids[0], now: 100), "the oldest went")
        #expect(ids.dropFirst().allSatisfy { table.isLive(id: $0, now: 100) })
        // Expired ones go first: a sign-in after they expired takes no live session with it.
        table.begin(id: [UInt8](repeating: 0xEE, count: 32), now: 5000)
        #expect(table.count == 1)
    }
}
