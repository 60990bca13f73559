import BridgeCore
import Foundation
import Logging
import Spool

/// What each path answers (docs/contracts.md, "Local HTTP interface"). Runs on the connection's thread.
struct HTTPRoutes: Sendable {
    let feed: ScanFeed
    let spool: Spool
    let policy: HTTPAccessPolicy
    let sessions: HTTPSessions
    let status: @Sendable () -> JSONValue
    let metrics: @Sendable () -> String
    let logger: Logger
    let counted: @Sendable () -> Void

    /// Headers on every answer: nothing cached, no MIME sniffing, no framing by other sites, no referrer.
    static let common: [(String, String)] = [
        ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
    ]
    /// The page runs only its own script and style: even text that escaped escaping could not run.
    static let pagePolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    static let json = ("Content-Type", "application/json")
    static let plain = ("Content-Type", "text/plain; charset=utf-8")

    /// The most `/scans` gives at once.
    static let maxLimit = 1000

    func handle(_ request: HTTPRequest) {
        counted()
        let path = request.path
        switch policy.verdict(
            method: request.method, path: path, host: request.header("Host"),
            authorization: request.header("Authorization"),
            session: policy.token != nil && sessions.isLive(cookie: request.cookie(HTTPAccessPolicy.cookieName)))
        {
        case .allowed: break
        case .login:
            return request.respond(303, Self.common + [("Location", "/login")], text: "")
        case .unauthorized:
            return request.respond(
                401, Self.common + [Self.plain, ("WWW-Authenticate", "Bearer realm=\"plings-bridge\"")],
                text: "a token is needed: Authorization: Bearer TOKEN (the file http.tokenFile names)\n")
        case .foreignHost:
            return request.respond(
                403, Self.common + [Self.plain],
                text: "this interface answers only to a loopback host name (127.0.0.1, [::1], localhost)\n")
        case .methodNotAllowed:
            return request.respond(
                405, Self.common + [Self.plain, ("Allow", "GET, HEAD")],
                text: "this interface is read-only (POST only signs in and out)\n")
        case .badHost:
            return request.respond(
                400, Self.common + [Self.plain, ("Connection", "close")],
                text: "the Host header is not a host name with an optional port\n")
        }
        switch path {
        case "/": page(request, BenchPage.html(signOut: policy.token != nil), "text/html; charset=utf-8")
        case "/app.js": page(request, BenchPage.script, "text/javascript; charset=utf-8")
        case "/app.css": page(request, BenchPage.style, "text/css; charset=utf-8")
        case "/events": events(request)
        case "/scans": scans(request)
        case "/status": request.respond(200, Self.common + [Self.json], text: status().encoded() + "\n")
        case "/metrics":
            request.respond(
                200, Self.common + [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], text: metrics())
        case "/healthz": request.respond(200, Self.common + [Self.plain], text: "ok\n")
        case "/readyz": readiness(request)
        case "/login": login(request)
        case "/logout": logout(request)
        default: request.respond(404, Self.common + [Self.plain], text: "not found\n")
        }
    }

    private func page(_ request: HTTPRequest, _ text: String, _ type: String) {
        request.respond(
            200, Self.common + [("Content-Type", type), ("Content-Security-Policy", Self.pagePolicy)], text: text)
    }

    /// `GET /events[?after=SEQ][&status=1]`: a client's `Last-Event-ID` wins over `after` (it is the newer).
    private func events(_ request: HTTPRequest) {
        let headers =
            Self.common + [("Content-Type", "text/event-stream; charset=utf-8"), ("X-Accel-Buffering", "no")]
        // HEAD: the headers alone (a stream's chunked framing would end with a terminator HEAD must not carry).
        guard request.method != "HEAD" else { return request.respond(200, headers, body: []) }
        let after =
            ServerSentEvents.sequence(request.header("Last-Event-ID"))
            ?? ServerSentEvents.sequence(request.argument("after"))
        let stream = EventStream(
            feed: feed, after: after, wantsStatus: request.argument("status") == "1",
            onError: { [logger] in
                logger.error("http: an event stream ended: the spool cannot be read", [("error", $0)])
            })
        request.respond(200, headers, stream: stream)
    }

    /// `GET /scans?after=SEQ&limit=N` (capture order) or `GET /scans?newest=N`: `{"last": SEQ, "scans": [...]}`,
    /// each scan its `spool export` object; `last` is where the next poll starts (`after=`).
    private func scans(_ request: HTTPRequest) {
        func number(_ name: String) -> Int?? {
            guard let text = request.argument(name) else { return .some(nil) }
            return ServerSentEvents.sequence(text).map { .some($0) } ?? nil
        }
        guard let after = number("after"), let limit = number("limit"), let newest = number("newest") else {
            return request.respond(
                400, Self.common + [Self.plain], text: "after, limit and newest take whole numbers from 0\n")
        }
        do throws(SpoolError) {
            let items: [SinkItem]
            let start = after ?? 0
            if let newest {
                items = try spool.newestScans(min(newest, Self.maxLimit))
            } else {
                items = try spool.scans(after: start, limit: min(limit ?? 100, Self.maxLimit))
            }
            var last = start
            if let seq = items.last?.seq { last = seq } else if newest != nil { last = try spool.lastSeq() }
            let body = JSONValue.object([
                ("last", .integer(last)), ("scans", .array(items.map { $0.record.json() })),
            ])
            request.respond(200, Self.common + [Self.json], text: body.encoded() + "\n")
        } catch {
            request.respond(503, Self.common + [Self.plain], text: "the spool cannot be read: \(error.description)\n")
        }
    }

    /// `GET /readyz`: 200 when the service is up, its spool readable and its last read committed; else 503 and
    /// why, one reason per line.
    private func readiness(_ request: HTTPRequest) {
        let reasons = Readiness.problems(status())
        if reasons.isEmpty {
            request.respond(200, Self.common + [Self.plain], text: "ready\n")
        } else {
            request.respond(503, Self.common + [Self.plain], text: reasons.map { $0 + "\n" }.joined())
        }
    }

    /// `GET /login`: the form; `POST /login` (`token=...`): a new session's cookie and back to the page.
    private func login(_ request: HTTPRequest) {
        guard policy.token != nil else {
            return request.respond(303, Self.common + [("Location", "/")], text: "")
        }
        if request.method == "POST" {
            if let submitted = FormURLEncoded.value(of: "token", in: request.body), policy.accepts(submitted) {
                guard let id = sessions.begin() else {
                    logger.error("http: a sign-in failed: the kernel gave no random bytes for a session")
                    return request.respond(
                        503, Self.common + [Self.plain], text: "cannot start a session now; try again\n")
                }
                return request.respond(
                    303,
                    Self.common + [
                        ("Location", "/"), ("Set-Cookie", policy.sessionCookie(id: id, lifetime: sessions.lifetime)),
                    ], text: "")
            }
            return request.respond(
                401,
                Self.common + [
                    ("Content-Type", "text/html; charset=utf-8"), ("Content-Security-Policy", Self.pagePolicy),
                ],
                text: BenchPage.login(failed: true))
        }
        request.respond(
            200,
            Self.common + [("Content-Type", "text/html; charset=utf-8"), ("Content-Security-Policy", Self.pagePolicy)],
            text: BenchPage.login(failed: false))
    }

    /// `POST /logout`: ends the session the cookie names, empties the cookie and goes to the sign-in form. A GET
    /// changes nothing (a link or a prefetch must not sign anyone out).
    private func logout(_ request: HTTPRequest) {
        guard request.method == "POST" else {
            return request.respond(
                405, Self.common + [Self.plain, ("Allow", "POST")], text: "sign out with POST (the page's button)\n")
        }
        sessions.end(cookie: request.cookie(HTTPAccessPolicy.cookieName))
        request.respond(
            303,
            Self.common + [
                ("Location", policy.token == nil ? "/" : "/login"), ("Set-Cookie", policy.endedSessionCookie()),
            ], text: "")
    }
}

/// What `/readyz` checks, from the status object (docs/contracts.md, "`status --json`").
enum Readiness {
    static func problems(_ status: JSONValue) -> [String] {
        guard case .object = status else { return ["the service is starting"] }
        var problems: [String] = []
        if status["spool"] == nil || status["spool"] == .null { problems.append("the spool cannot be read") }
        // The newest read of any device tells whether the pipeline commits.
        if case .object(let reads)? = status["lastReads"] {
            let newest = reads.compactMap { _, read -> (String, String)? in
                guard case .string(let time)? = read["time"], case .string(let outcome)? = read["outcome"] else {
                    return nil
                }
                return (time, outcome)
            }.max { $0.0 < $1.0 }
            if newest?.1 == "refused" {
                let why = status["lastError"].flatMap { if case .string(let s) = $0 { s } else { nil } }
                problems.append("the last read could not be committed" + (why.map { ": \($0)" } ?? ""))
            }
        }
        return problems
    }
}
