import Foundation
import Platform

/// One request as the receiver recorded it.
public struct WebhookRequest: Sendable {
    /// The `Idempotency-Key` header, and the one the contract gives these scans (computed by the receiver).
    public var key: String?
    public var expectedKey: String?
    public var ids: [String]
    public var batch: Bool
    /// The answer's status; nil when the receiver closed the connection without one.
    public var status: Int?
    /// Whether the signature verified (nil: not checked).
    public var signature: Bool?
    /// Why the receiver refused it with 401 (nil: it did not).
    public var error: String?
    /// The SHA-256 of the body's bytes, as the receiver read them (hex).
    public var bodyDigest: String?

    public var taken: Bool { status.map { (200..<300).contains($0) } ?? false }

    init(_ json: [String: Any]) {
        key = json["key"] as? String
        expectedKey = json["expectedKey"] as? String
        ids = json["ids"] as? [String] ?? []
        batch = json["batch"] as? Bool ?? false
        status = json["status"] as? Int
        signature = json["signature"] as? Bool
        error = json["error"] as? String
        bodyDigest = json["bodyDigest"] as? String
    }
}

/// The webhook receiver stand-in (Tests/Rigs/webhook_receiver.py): checks the token and the body's signature with
/// Python's `hmac`, records every request, and fails on demand. It can go away and come back on the same port
/// (an outage); what it recorded before is kept.
public final class WebhookReceiver: Sendable {
    public let token: String
    public let secret: String
    public let tokenFile: String
    public let secretFile: String
    private let directory: TemporaryDirectory
    private struct State {
        var process: RunningProcess?
        var port = 0
        /// Requests recorded by instances that went away.
        var earlier: [WebhookRequest] = []
    }
    private let state = Mutex<State>(State())

    public var port: Int { state.withLock { $0.port } }
    public var url: String { "http://127.0.0.1:\(port)/hook" }

    public init() throws {
        directory = TemporaryDirectory("webhook")
        token = "hook-token-\(UUID().uuidString.prefix(12))"
        secret = "hook-secret-\(UUID().uuidString)"
        tokenFile = directory.file("token")
        secretFile = directory.file("secret")
        for (path, text) in [(tokenFile, token), (secretFile, secret)] {
            _ = FileManager.default.createFile(
                atPath: path, contents: Data((text + "\n").utf8), attributes: [.posixPermissions: 0o600])
        }
        try start(port: 0)
    }

    deinit { stop() }

    /// Starts an instance (on `port`, 0: any).
    private func start(port: Int) throws {
        let process = try RunningProcess(
            "/usr/bin/python3",
            [
                Products.rig("webhook_receiver.py"), "--port", String(port), "--token-file", tokenFile,
                "--secret-file", secretFile,
            ])
        guard let ready = process.waitForLine(timeout: 20, where: { $0.hasPrefix("READY port=") }),
            let bound = Int(ready.dropFirst("READY port=".count))
        else {
            process.stop()
            throw RigError("webhook receiver did not start: \(process.stderrText)")
        }
        state.withLock {
            $0.process = process
            $0.port = bound
        }
    }

    /// The receiver goes away (connections are refused), keeping what it recorded.
    public func goAway() throws {
        let recorded = try current()
        let process = state.withLock { s -> RunningProcess? in
            s.earlier += recorded
            defer { s.process = nil }
            return s.process
        }
        process?.stop()
    }

    /// It comes back on the same port.
    public func comeBack() throws { try start(port: port) }

    public func stop() {
        state.withLock { $0.process }?.stop()
        directory.remove()
    }

    /// Switches the fault mode: `ok`, `500`, `429` (`retryAfter`), `slow` (`delay`), `close`, `413-batch`,
    /// `redirect`; `refuse` lists scan ids answered 422.
    public func setMode(_ mode: String, _ parameters: [String: Any] = [:]) throws {
        var body = parameters
        body["mode"] = mode
        _ = try control("POST", "/_control/mode", body: body)
    }

    /// Every request so far, by every instance; waits up to `wait` s until the running one holds `min`.
    public func requests(min: Int = 0, wait: Double = 0) throws -> [WebhookRequest] {
        let earlier = state.withLock { $0.earlier }
        return earlier + (try current(min: max(0, min - earlier.count), wait: wait))
    }

    /// The ids the receiver took (answered 2xx), each as often as it took it.
    public func taken() throws -> [String] {
        try requests().filter(\.taken).flatMap(\.ids)
    }

    private func current(min: Int = 0, wait: Double = 0) throws -> [WebhookRequest] {
        guard state.withLock({ $0.process }) != nil else { return [] }
        let json = try control("GET", "/_control/requests?min=\(min)&wait=\(wait)", timeout: wait + 10)
        return (json["requests"] as? [[String: Any]] ?? []).map(WebhookRequest.init)
    }

    private func control(_ method: String, _ path: String, body: [String: Any]? = nil, timeout: Double = 10) throws
        -> [String: Any]
    {
        try RigControl.request(port: port, method, path, body: body, timeout: timeout)
    }
}
