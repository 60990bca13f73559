import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import Testing

/// Security review findings 2, 3 and 4: the token stays a token (no header injection), stays out of logs in
/// every spelling, and stays out of the spool when the API echoes it back (docs/reliability.md).
@Suite(.serialized)
struct TokenSecurityTests {
    let binary = Products.path("plings-bridge")

    func environment(_ dir: TemporaryDirectory, _ extra: [String: String] = [:]) -> [String: String] {
        Products.isolatedEnvironment(home: dir.path).merging(extra) { $1 }
    }

    func config(_ dir: TemporaryDirectory, api: APIStandIn, tokenFile: String) throws -> String {
        let path = dir.file("config.json")
        try """
        {"api": {"url": "\(api.url)", "tokenFile": "\(tokenFile)", "allowInsecureHTTP": true, "timeout": 2},
         "nfc": {"enabled": false}, "hid": {"enabled": false}, "location": {"enabled": false}}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func writeSecret(_ text: String, _ path: String) throws {
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    }

    // MARK: finding 2

    /// `SECRET\r\nHost: evil.example` would become a second header line: it is refused at load (exit 2, naming
    /// the file), and the API never sees a request.
    @Test func tokenWithCRLFIsRefusedAndNothingIsSent() throws {
        let api = try APIStandIn()
        let dir = TemporaryDirectory("tok")
        defer {
            api.stop()
            dir.remove()
        }
        let bad = dir.file("bad-token")
        try writeSecret("SECRET-0123456789abcdef\r\nHost: evil.example\n", bad)
        let config = try config(dir, api: api, tokenFile: bad)
        let scan = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=A&p=1", "--config", config, "--spool", dir.file("s.sqlite")],
            environment: environment(dir))
        #expect(scan.status == 2)
        #expect(scan.stderr.contains("token file \(bad)") && scan.stderr.contains("control character (0xD)"))
        #expect(!scan.stderr.contains("SECRET"))
        let env = try ProcessRunner.run(
            binary, ["scan", "x", "--dry-run", "--api-url", "https://api.example/graphql"],
            environment: environment(dir, ["PLINGS_BRIDGE_API_TOKEN": "SECRET-0123456789\nX-Evil: 1"]))
        #expect(env.status == 2 && env.stderr.contains("PLINGS_BRIDGE_API_TOKEN"))
        #expect(try api.requests().isEmpty)
    }

    /// A running service whose token file turns bad keeps its previous token: the reload fails with one line,
    /// and the next scan reaches the API with the old `Authorization` and no injected header.
    @Test func badTokenOnReloadKeepsThePreviousToken() throws {
        let api = try APIStandIn()
        let dir = TemporaryDirectory("tok")
        defer {
            api.stop()
            dir.remove()
        }
        let tokenFile = dir.file("bridge-token")
        try writeSecret(api.token + "\n", tokenFile)
        let config = try config(dir, api: api, tokenFile: tokenFile)
        let spool = dir.file("s.sqlite")
        let bridge = try RunningProcess(
            binary, ["run", "--config", config, "--spool", spool], environment: environment(dir))
        defer { bridge.stop() }
        #expect(eventually(timeout: 20) { bridge.stderrText.contains("msg=\"ready:") })
        try writeSecret("SECRET-0123456789abcdef\r\nHost: evil.example\n", tokenFile)
        bridge.signal(SIGHUP)
        #expect(
            eventually(timeout: 10) {
                bridge.stderrText.contains("reload refused: the service keeps running on the previous configuration")
            })
        #expect(!bridge.stderrText.contains("SECRET"))
        // A scan spooled by another process (no API of its own) is picked up and sent by the service.
        let scan = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=A&p=1", "--spool", spool, "--no-location"],
            environment: environment(dir))
        #expect(scan.status == 0, "\(scan.stderr)")
        let requests = try api.requests(min: 1, wait: 15)
        let request = try #require(requests.first)
        let headers = try #require(request["headers"] as? [String: String])
        #expect(headers["authorization"] == "Bearer \(api.token)")
        #expect(headers["host"] == "127.0.0.1:\(api.port)")
        let raw = (request["rawHeaders"] as? [[String]] ?? []).map { $0.joined(separator: ": ") }
        #expect(!raw.contains { $0.contains("evil") }, "\(raw)")
        #expect(request["delivered"] as? Bool == true)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    // MARK: finding 3

    /// A token with `"` and `\` is redacted before quoting: neither its raw nor its escaped spelling is logged.
    @Test func tokenWithQuotesIsRedactedInEverySpelling() throws {
        let token = #"tok"en\with-quote-0123456789"#
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let logger = Logger(fd: fds[1])
        logger.addSecret(token)
        logger.error("refused \(token)", [("reason", "the API said: \(token) is wrong"), ("plain", token)])
        close(fds[1])
        let out = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true).readDataToEndOfFile()
        let line = String(decoding: out, as: UTF8.self)
        #expect(line.hasSuffix("\n") && line.filter { $0 == "\n" }.count == 1)
        for spelling in [token, #"tok\"en\\with-quote-0123456789"#, "0123456789"] {
            #expect(!line.contains(spelling), "\(spelling) in \(line)")
        }
        #expect(
            line
                == #"level=error msg="refused [redacted]" reason="the API said: [redacted] is wrong" plain=[redacted]"#
                + "\n")
    }

    /// Tokens shorter than 16 characters are refused at load (they could not be redacted safely either).
    @Test func implausiblyShortTokenIsRefused() throws {
        let dir = TemporaryDirectory("tok")
        defer { dir.remove() }
        let short = dir.file("short")
        try writeSecret("abc\n", short)
        let result = try ProcessRunner.run(
            binary, ["scan", "x", "--dry-run", "--api-url", "https://api.example/graphql", "--api-token-file", short],
            environment: environment(dir))
        #expect(result.status == 2)
        #expect(result.stderr.contains("the token is 3 characters long, shorter than the minimum of 16"))
    }

    // MARK: finding 4

    /// An API that echoes the token in an error body (raw, JSON-escaped, or at the 2048-byte cut of the kept
    /// body): the spool's files never contain it, and `lastError`/`response` say `[redacted]`.
    @Test func tokenEchoedByTheAPINeverReachesTheSpool() throws {
        let token = #"echo/token"with\quote-0123456789"#
        let api = try APIStandIn(token: token)
        let dir = TemporaryDirectory("tok")
        defer {
            api.stop()
            dir.remove()
        }
        let tokenFile = dir.file("bridge-token")
        try writeSecret(token + "\n", tokenFile)
        let config = try config(dir, api: api, tokenFile: tokenFile)
        let spool = dir.file("s.sqlite")
        var quoted = ""
        JSONValue.string(token).write(to: &quoted)
        let escaped = String(quoted.dropFirst().dropLast())  // the token as it reads inside a JSON string
        // Dead: 422 with the token in the error message and, JSON-escaped, straddling the 2048-byte cut.
        let head = #"{"errors":[{"message":"bad token "# + escaped + #""}],"pad":""#
        let deadBody = head + String(repeating: "x", count: 2040 - head.utf8.count) + escaped + "\"}"
        try api.setMode("422", ["body": deadBody, "count": 1])
        let dead = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=A&p=1", "--config", config, "--spool", spool],
            environment: environment(dir))
        #expect(dead.status == 0, "\(dead.stderr)")
        let deadRecord = try JSONParser.parse(dead.stdout.trimmingASCIIWhitespace())
        #expect(deadRecord["state"] == .string("dead"))
        #expect(deadRecord["lastError"] == .string("HTTP 422: bad token [redacted]"))
        // Retried: 500 with the token in the message.
        try api.setMode("500", ["body": #"{"errors":[{"message":"token "# + escaped + #" expired"}]}"#, "count": 1])
        let retry = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=B&p=1", "--config", config, "--spool", spool],
            environment: environment(dir))
        let retryRecord = try JSONParser.parse(retry.stdout.trimmingASCIIWhitespace())
        #expect(retryRecord["state"] == .string("pending"))
        #expect(retryRecord["lastError"] == .string("HTTP 500: token [redacted] expired"))
        #expect(!dead.stderr.contains("0123456789") && !retry.stderr.contains("0123456789"))
        // The bytes on disk: database, WAL and shared memory, in every spelling and any 10-byte piece of it.
        let pieces = [token, escaped, "0123456789", "echo/token"]
        for file in [spool, spool + "-wal", spool + "-shm"] {
            guard let bytes = FileManager.default.contents(atPath: file) else { continue }
            for piece in pieces {
                #expect(bytes.range(of: Data(piece.utf8)) == nil, "\(piece) found in \(file)")
            }
        }
    }
}
