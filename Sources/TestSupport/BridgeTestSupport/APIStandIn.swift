import Foundation

/// The strict GraphQL stand-in of the Plings API (Tests/Rigs/api_standin.py), started for one test.
public final class APIStandIn: Sendable {
    public let process: RunningProcess
    public let port: Int
    public let token: String
    public let tokenFile: String
    private let directory: TemporaryDirectory

    public var url: String { "http://127.0.0.1:\(port)/graphql" }

    public init(token: String = "test-token-\(UUID().uuidString.prefix(12))") throws {
        directory = TemporaryDirectory("api")
        self.token = token
        tokenFile = directory.file("token")
        // Private, as a real token file is: the bridge warns about one others can read.
        _ = FileManager.default.createFile(
            atPath: tokenFile, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600])
        process = try RunningProcess(
            "/usr/bin/python3", [Products.rig("api_standin.py"), "--port", "0", "--token-file", tokenFile])
        guard let ready = process.waitForLine(timeout: 20, where: { $0.hasPrefix("READY port=") }),
            let port = Int(ready.dropFirst("READY port=".count))
        else {
            process.stop()
            throw RigError("API stand-in did not start: \(process.stderrText)")
        }
        self.port = port
    }

    deinit { stop() }

    public func stop() {
        process.stop()
        directory.remove()
    }

    /// Stops the server but keeps its token file (the API "goes away").
    public func kill() { process.stop() }

    /// Switches the fault mode, e.g. `setMode("500")`, `setMode("429", ["retryAfter": 2])`.
    public func setMode(_ mode: String, _ parameters: [String: Any] = [:]) throws {
        var body = parameters
        body["mode"] = mode
        _ = try control("POST", "/_control/mode", body: body)
    }

    /// Requests recorded so far (parsed JSON objects), waiting up to `wait` seconds until at least `min` exist.
    public func requests(min: Int = 0, wait: Double = 0) throws -> [[String: Any]] {
        let path = "/_control/requests?since=0&min=\(min)&wait=\(wait)&limit=1000000"
        let json = try control("GET", path, timeout: wait + 10)
        return json["requests"] as? [[String: Any]] ?? []
    }

    public func stats() throws -> [String: Any] { try control("GET", "/_control/stats") }

    /// The inputs of the scans the API resolved, in the order it executed them: requests in arrival order, and
    /// within a batched request its fields in document order (docs/contracts.md, "Batched request").
    public func deliveredInputs() throws -> [[String: Any]] {
        try requests().flatMap { request -> [[String: Any]] in
            let delivered = Set(request["deliveredAliases"] as? [String] ?? [])
            let fields = request["fields"] as? [[Any]] ?? []
            return fields.compactMap { field in
                guard field.count == 2, let alias = field[0] as? String, delivered.contains(alias) else { return nil }
                return field[1] as? [String: Any]
            }
        }
    }

    /// Refuses requests with more than `maxAliases` root fields, as an alias-limiting server does (nil: no limit).
    public func setAliasLimit(_ maxAliases: Int?) throws {
        _ = try control("POST", "/_control/limits", body: ["maxAliases": maxAliases.map { $0 as Any } ?? NSNull()])
    }

    /// Makes the field of `identifier` fail with a GraphQL error of `code` (`count` times, or until a reset).
    public func setFieldFault(identifier: String, code: String, count: Int? = nil) throws {
        var body: [String: Any] = ["identifier": identifier, "code": code]
        if let count { body["count"] = count }
        _ = try control("POST", "/_control/field-fault", body: body)
    }

    private func control(_ method: String, _ path: String, body: [String: Any]? = nil, timeout: Double = 10) throws
        -> [String: Any]
    {
        try RigControl.request(port: port, method, path, body: body, timeout: timeout)
    }
}

/// The control endpoints of the Python stand-ins (`/_control/...`), asked with curl.
public enum RigControl {
    /// The JSON object a stand-in on `port` answers to `method path` with `body`, within `timeout` seconds.
    public static func request(
        port: Int, _ method: String, _ path: String, body: [String: Any]? = nil, timeout: Double = 10
    ) throws -> [String: Any] {
        var args = ["-s", "-X", method, "--max-time", String(Int(timeout) + 1), "http://127.0.0.1:\(port)\(path)"]
        if let body {
            let data = try JSONSerialization.data(withJSONObject: body)
            args += ["-H", "Content-Type: application/json", "--data-binary", String(decoding: data, as: UTF8.self)]
        }
        let result = try ProcessRunner.run("/usr/bin/curl", args, timeout: timeout + 5)
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw RigError("control \(path) failed: \(result.stdout) \(result.stderr)") }
        return object
    }
}

/// A rig that did not behave.
public struct RigError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
