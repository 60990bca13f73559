import BridgeCore
import BridgeTestSupport
import Foundation
import Platform
import Spool
import Testing

/// The real bridge against the strict API stand-in: nothing is lost, order holds, the token stays secret.
@Suite(.serialized)
struct PlingsAPITests {
    let binary = Products.path("plings-bridge")

    struct Setup {
        let api: APIStandIn
        let dir: TemporaryDirectory
        let spoolPath: String
        let config: String

        func environment() -> [String: String] { Products.isolatedEnvironment(home: dir.path) }

        func teardown() {
            api.stop()
            dir.remove()
        }
    }

    func setup(_ extra: String = "") throws -> Setup {
        let api = try APIStandIn()
        let dir = TemporaryDirectory("fwd")
        let config = dir.file("config.json")
        try """
        {"api": {"url": "\(api.url)", "tokenFile": "\(api.tokenFile)", "allowInsecureHTTP": true,
                 "timeout": 2, "concurrency": 4\(extra)},
         "nfc": {"enabled": false}, "hid": {"enabled": false}, "location": {"enabled": false}}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return Setup(api: api, dir: dir, spoolPath: dir.file("spool.sqlite"), config: config)
    }

    /// Spools scans without delivering them (no API flags): the backlog.
    func spoolBacklog(_ s: Setup, identifiers: [String], perIdentifier: Int) throws -> [String: [String]] {
        let spool = try Spool(path: s.spoolPath)
        let builder = ScanBuilder(parser: PlingsURLParser())
        var order: [String: [String]] = [:]
        var t = Date().addingTimeInterval(-3600)
        for n in 0..<perIdentifier {
            for identifier in identifiers {
                t = t.addingTimeInterval(0.01)
                let read = Read(
                    sourceKind: SourceKind("hid"), device: "bench",
                    raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1.\(n)", time: t
                )
                let scan = builder.build(read, fix: nil)
                try spool.insert([scan])
                order[identifier, default: []].append(scan.id)
            }
        }
        return order
    }

    func startBridge(_ s: Setup) throws -> RunningProcess {
        try RunningProcess(binary, ["run", "--config", s.config, "--spool", s.spoolPath], environment: s.environment())
    }

    /// Waits (bounded) until the spool has no pending scans; returns the final counts.
    func waitForDrain(_ s: Setup, timeout: Double) throws -> [ScanState: Int] {
        let spool = try Spool(path: s.spoolPath)
        let deadline = MonotonicClock.deadline(after: timeout)
        while true {
            let counts = try spool.stats().counts
            if (counts[.pending] ?? 0) == 0 || MonotonicClock.now() > deadline { return counts }
            // Delivery progress is visible only in the spool or the stand-in: ask the stand-in to hold the
            // answer until more requests arrived, which paces this loop by real events.
            _ = try s.api.requests(min: (try s.api.requests().count) + 1, wait: 0.5)
        }
    }

    @Test func backlogBuiltWhileAPIFailsIsDeliveredInOrderWithOriginalTimestamps() throws {
        let s = try setup()
        defer { s.teardown() }
        let order = try spoolBacklog(s, identifiers: ["A", "B", "C", "D", "E"], perIdentifier: 20)
        let spool = try Spool(path: s.spoolPath)
        let timestamps = Dictionary(
            uniqueKeysWithValues: try spool.list().map { ($0.id, $0.inputJSON ?? "") })
        try s.api.setMode("503")
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        // The first failures arrive; the bridge backs off instead of hammering the API.
        let failing = try s.api.requests(min: 2, wait: 10)
        #expect(failing.count >= 2)
        try s.api.setMode("ok")
        let counts = try waitForDrain(s, timeout: 60)
        #expect(counts[.pending] ?? 0 == 0)
        #expect(counts[.delivered] == 100)
        // Per identifier, delivered in capture order, each with its original input (timestamp) byte for byte;
        // several identifiers' scans went in one request (docs/contracts.md, "Batched request").
        var seen: [String: [String]] = [:]
        for input in try s.api.deliveredInputs() {
            let timestamp = (input["scanMetadata"] as? [String: Any])?["timestamp"] as? String
            seen[input["identifier"] as? String ?? "", default: []].append(timestamp ?? "")
        }
        var expected: [String: [String]] = [:]
        for (identifier, ids) in order {
            expected[identifier] = try ids.map { id in
                let stored = try JSONParser.parse(timestamps[id] ?? "")
                return stored["scanMetadata"]?["timestamp"]?.stringValue ?? "?"
            }
        }
        #expect(seen == expected)
        // A request retried after a 503 is the same request: the same scans under the same Idempotency-Key.
        var members: [String: Set<[String]>] = [:]
        for request in try s.api.requests() {
            let key = (request["headers"] as? [String: Any])?["idempotency-key"] as? String ?? ""
            let inputs = (request["inputs"] as? [[String: Any]] ?? []).map {
                "\($0["identifier"] ?? "")@\(($0["scanMetadata"] as? [String: Any])?["timestamp"] ?? "")"
            }
            members[key, default: []].insert(inputs)
        }
        #expect(members.values.allSatisfy { $0.count == 1 }, "\(members.filter { $0.value.count > 1 })")
        #expect((try s.api.stats()["batchedRequests"] as? Int ?? 0) > 0)
        let stats = try s.api.stats()
        #expect(stats["orderViolations"] as? Int == 0)
        #expect(stats["identifierOverlaps"] as? Int == 0)
        #expect((stats["maxInFlight"] as? Int ?? 0) <= 4)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        // One line when delivery started failing, one when it resumed: not one per failed retry.
        let log = bridge.stderrText
        #expect(log.components(separatedBy: "delivery failing").count - 1 == 1)
        #expect(log.components(separatedBy: "delivery resumed").count - 1 == 1)
        #expect(!log.contains(s.api.token))
    }

    @Test func unauthorizedPausesWithoutBurningScansAndSIGHUPResumes() throws {
        let s = try setup()
        defer { s.teardown() }
        _ = try spoolBacklog(s, identifiers: ["A", "B"], perIdentifier: 3)
        try s.api.setMode("401")
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        _ = try s.api.requests(min: 1, wait: 10)
        // Paused: after the first wave (at most one request per identifier was in flight) nothing more is
        // sent until a reload or the long pause ends.
        let quiet = try s.api.requests(min: 3, wait: 2)
        #expect(quiet.count <= 2)
        let spool = try Spool(path: s.spoolPath)
        let pending = try spool.list(state: .pending)
        #expect(pending.count == 6)
        #expect(pending.allSatisfy { $0.attempts == 0 })
        #expect(pending.contains { $0.lastError?.contains("401") == true })
        try s.api.setMode("ok")
        bridge.signal(SIGHUP)
        let counts = try waitForDrain(s, timeout: 30)
        #expect(counts[.delivered] == 6)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        let log = bridge.stderrText
        #expect(log.components(separatedBy: "delivery paused").count - 1 == 1)
        #expect(log.contains("delivery resumed"))
        #expect(!log.contains(s.api.token))
    }

    @Test func validationErrorsDeadLetterAndRetryRevives() throws {
        let s = try setup()
        defer { s.teardown() }
        _ = try spoolBacklog(s, identifiers: ["A"], perIdentifier: 1)
        try s.api.setMode("gql_validation")
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        let spool = try Spool(path: s.spoolPath)
        _ = try s.api.requests(min: 1, wait: 10)
        // The forwarder logs the dead letter after the spool recorded it.
        bridge.waitForLogLine(timeout: 5) { $0.contains("scan refused by the API") }
        let dead = try spool.list(state: .dead)
        #expect(dead.count == 1)
        #expect(dead.first?.lastError?.contains("BAD_USER_INPUT") == true)
        #expect(dead.first?.response?.contains("invalid input") == true)
        // Revived by another process while `run` is up: noticed at once (the spool watch), delivered.
        try s.api.setMode("ok")
        let retry = try ProcessRunner.run(
            binary, ["spool", "retry", "--dead", "--spool", s.spoolPath], environment: s.environment())
        #expect(retry.status == 0)
        let counts = try waitForDrain(s, timeout: 15)
        #expect(counts[.delivered] == 1)
        bridge.signal(SIGTERM)
        _ = bridge.waitForExit(timeout: 5)
    }

    @Test func killedMidDrainAndRestartedLosesNothing() throws {
        let s = try setup()
        defer { s.teardown() }
        let order = try spoolBacklog(
            s, identifiers: ["Ka", "Kb", "Kc", "Kd", "Ke", "Kf", "Kg", "Kh", "Ki", "Kj"], perIdentifier: 30)
        try s.api.setMode("slow", ["delay": 0.02])
        let first = try startBridge(s)
        _ = try s.api.requests(min: 40, wait: 20)
        first.signal(SIGKILL)
        _ = first.waitForExit(timeout: 5)
        try s.api.setMode("ok")
        let second = try startBridge(s)
        defer { second.stop() }
        let counts = try waitForDrain(s, timeout: 60)
        #expect(counts[.delivered] == 300, "\(counts)")
        // Every scan reached the API and nothing else did (scans are told apart by identifier and timestamp:
        // several went in one request, under the request's key).
        func name(_ input: [String: Any]?) -> String {
            "\(input?["identifier"] ?? "")@\((input?["scanMetadata"] as? [String: Any])?["timestamp"] ?? "")"
        }
        let sent = try s.api.deliveredInputs().map(name)
        let ids = Set(order.values.flatMap { $0 })
        let all = Set(
            try Spool(path: s.spoolPath).list().filter { ids.contains($0.id) }.map { record in
                name(try JSONSerialization.jsonObject(with: Data((record.inputJSON ?? "{}").utf8)) as? [String: Any])
            })
        #expect(all.count == 300)
        #expect(all.subtracting(sent).count == 0)
        #expect(Set(sent).subtracting(all).count == 0)
        // Duplicates only as retries of a request in flight when killed: at most one scan per identifier.
        #expect(sent.count - Set(sent).count <= 10)
        #expect(try s.api.stats()["orderViolations"] as? Int == 0)
        second.signal(SIGTERM)
        #expect(second.waitForExit(timeout: 5) == 0)
    }

    @Test func retryAfterIsHonoured() throws {
        let s = try setup()
        defer { s.teardown() }
        _ = try spoolBacklog(s, identifiers: ["A"], perIdentifier: 1)
        try s.api.setMode("429", ["retryAfter": 2, "count": 1])
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        let requests = try s.api.requests(min: 2, wait: 15)
        #expect(requests.count == 2)
        if requests.count == 2, let t0 = requests[0]["arrivedMono"] as? Double,
            let t1 = requests[1]["arrivedMono"] as? Double
        {
            #expect(t1 - t0 >= 1.9, "retried after \(t1 - t0) s despite Retry-After: 2")
        }
        bridge.signal(SIGTERM)
        _ = bridge.waitForExit(timeout: 5)
    }

    /// While the API has asked for a pause (Retry-After) no request may go out; a scan committed meanwhile (here by
    /// another process, noticed through the spool) must wait without the coordinator spinning. It once did: the
    /// wake-up stayed set while there was no room to claim, so every wait returned at once until the backoff ended
    /// (up to 300 s, a core's worth of CPU on a gate box that is offline).
    @Test func scansCommittedDuringABackoffWaitWithoutSpinning() throws {
        let s = try setup()
        defer { s.teardown() }
        _ = try spoolBacklog(s, identifiers: ["A"], perIdentifier: 1)
        try s.api.setMode("429", ["retryAfter": 30, "count": 100])
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(try s.api.requests(min: 1, wait: 15).count == 1)
        let scan = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=B&p=1", "--config", s.config, "--spool", s.spoolPath],
            environment: s.environment())
        #expect(scan.status == 0)
        // The service notices the scan at once (the spool watch); then, for 4 s, it has nothing to do but wait.
        _ = bridge.waitForExit(timeout: 2.5)
        let before = bridge.cpuTicks
        _ = bridge.waitForExit(timeout: 4)
        let used = bridge.cpuTicks - before
        #expect(used <= 20, "\(used) ticks of CPU in 4 s of backoff")
        // Still only the first request and the scan command's own attempt: the Retry-After is honoured.
        #expect(try s.api.requests().count == 2)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    /// While delivery fails, one probe at a time, each waiting at most the backoff's ceiling for its place in the
    /// episode (docs/operations.md: 1 s doubling, full jitter). The requests already in flight when the API starts
    /// failing are one failed round, not one failure each, and the scans claimed but not yet sent wait for the
    /// probe. It was not so: in a soak the four workers' failures and the four queued requests each doubled the
    /// wait, and after 16 s of API errors the backlog waited 183 s.
    @Test func aFailingRoundCountsOnceAndOneProbeGoesAtATime() throws {
        let s = try setup(#", "batchSize": 1"#)
        defer { s.teardown() }
        let identifiers = "abcdefghjkmnpqrs".map { "Pr\($0)" }  // base58: no 0, O, I or l
        _ = try spoolBacklog(s, identifiers: identifiers, perIdentifier: 1)
        // Each answer takes 0.3 s, so the workers' first requests are in flight together.
        try s.api.setMode("503", ["count": 6, "delay": 0.3])
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        let counts = try waitForDrain(s, timeout: 40)
        #expect(counts[.delivered] == 16, "\(counts)")
        let requests = try s.api.requests().filter { $0["status"] != nil }
        func time(_ r: [String: Any], _ key: String) -> Double { r[key] as? Double ?? 0 }
        let failed = requests.filter { "\($0["status"] ?? "")" == "503" }
        #expect(failed.count == 6)
        let firstFailure = failed.map { time($0, "answeredMono") }.min() ?? 0
        let recovered =
            requests.filter { "\($0["status"] ?? "")" == "200" && time($0, "arrivedMono") > firstFailure }
            .map { time($0, "arrivedMono") }.min() ?? .infinity
        // The probes: every request sent after the first failure was answered, up to the first that was delivered.
        let probes = requests.filter { time($0, "arrivedMono") > firstFailure && time($0, "arrivedMono") <= recovered }
            .sorted { time($0, "arrivedMono") < time($1, "arrivedMono") }
        #expect(!probes.isEmpty)
        var previousAnswer =
            requests.filter { time($0, "arrivedMono") < firstFailure }
            .map { time($0, "answeredMono") }.max() ?? firstFailure
        for (k, probe) in probes.enumerated() {
            let wait = time(probe, "arrivedMono") - previousAnswer
            #expect(wait >= 0, "probe \(k) went while another request was unanswered (\(wait) s)")
            #expect(wait <= Double(1 << k) + 0.5, "probe \(k) waited \(wait) s; the backoff's ceiling is \(1 << k) s")
            previousAnswer = time(probe, "answeredMono")
        }
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    /// A reload is the operator saying "try again": a backoff in force ends at once, even one the server asked for
    /// (docs/operations.md, "Reload"), as a pause does.
    @Test func aReloadEndsABackoffAtOnce() throws {
        let s = try setup()
        defer { s.teardown() }
        _ = try spoolBacklog(s, identifiers: ["Rb"], perIdentifier: 1)
        try s.api.setMode("503", ["retryAfter": 120, "count": 1])
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(try s.api.requests(min: 1, wait: 15).count == 1)
        // The backoff is in force once the failure is told (the line is written as the wait is set).
        #expect(bridge.waitForLogLine(timeout: 10) { $0.contains("delivery failing") } != nil)
        bridge.signal(SIGHUP)
        let requests = try s.api.requests(min: 2, wait: 10)
        #expect(requests.count == 2, "the reload did not end the 120 s Retry-After")
        #expect(try waitForDrain(s, timeout: 10)[.delivered] == 1)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        #expect(bridge.stderrText.contains("configuration reloaded; trying again now"), "\(bridge.stderrText)")
    }

    @Test func scanMakesOneAttemptAndHeadersMatchTheDesign() throws {
        let s = try setup()
        defer { s.teardown() }
        let result = try ProcessRunner.run(
            binary,
            [
                "scan", "https://s.plings.io/?t=n&i=4kyQ&p=4.2.3.3.6&cp=X1", "--config", s.config, "--spool",
                s.spoolPath,
                "--fixed-location", "59.3293,18.0686,8",
            ],
            environment: s.environment())
        #expect(result.status == 0, "\(result.stderr)")
        let record = try JSONParser.parse(result.stdout.trimmingASCIIWhitespace())
        #expect(record["state"] == .string("delivered"))
        #expect(record["attempts"] == .integer(1))
        let requests = try s.api.requests()
        #expect(requests.count == 1)
        let headers = requests.first?["headers"] as? [String: String] ?? [:]
        #expect(headers["authorization"] == "Bearer \(s.api.token)")
        #expect(headers["content-type"] == "application/json")
        #expect(headers["idempotency-key"] == record["id"]?.stringValue)
        #expect(headers["user-agent"]?.hasPrefix("plings-bridge/") == true)
        let body = requests.first?["body"] as? [String: Any]
        #expect(body?["operationName"] as? String == "ResolveIdentifier")
        #expect(!result.stderr.contains(s.api.token))
        // The API refusing the input: the scan is dead, `scan` still succeeded (it was spooled).
        try s.api.setMode("422")
        let refused = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=Z&p=1", "--config", s.config, "--spool", s.spoolPath],
            environment: s.environment())
        #expect(refused.status == 0)
        #expect(try JSONParser.parse(refused.stdout.trimmingASCIIWhitespace())["state"] == .string("dead"))
    }

    @Test func unreachableAPIKeepsScansPendingAndTokenOutOfErrors() throws {
        let s = try setup()
        defer { s.teardown() }
        s.api.kill()  // connection refused from now on
        let result = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=A&p=1", "--config", s.config, "--spool", s.spoolPath],
            environment: s.environment())
        #expect(result.status == 0)
        let record = try JSONParser.parse(result.stdout.trimmingASCIIWhitespace())
        #expect(record["state"] == .string("pending"))
        #expect(record["lastError"]?.stringValue?.isEmpty == false)
        #expect(!result.stderr.contains(s.api.token) && !result.stdout.contains(s.api.token))
    }

    /// Hardening finding 11: a 3xx means a wrong api.url. It is never followed (the token would go elsewhere)
    /// nor retried forever: delivery pauses with one line naming the redirect and its Location, the scans stay
    /// pending with no attempt burnt, `status` shows it, and a reload resumes.
    @Test func redirectPausesDeliveryAndNamesTheLocation() throws {
        let s = try setup()
        defer { s.teardown() }
        _ = try spoolBacklog(s, identifiers: ["A", "B"], perIdentifier: 2)
        try s.api.setMode("301", ["location": "https://elsewhere.example/graphql"])
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        let paused = bridge.waitForLogLine(timeout: 10) { $0.contains("delivery paused") }
        #expect(paused?.contains("https://elsewhere.example/graphql") == true, "\(bridge.stderrText)")
        #expect(paused?.contains("redirect") == true)
        // Paused, not retried: at most the first wave (one request per identifier) reached the stand-in.
        #expect(try s.api.requests(min: 3, wait: 2).count <= 2)
        let spool = try Spool(path: s.spoolPath)
        #expect(try spool.list(state: .pending).allSatisfy { $0.attempts == 0 })
        // The status snapshot is refreshed every 5 s: it shows the pause by its next refresh.
        var delivery: JSONValue?
        #expect(
            eventually(timeout: 12) {
                let status = try? ProcessRunner.run(
                    binary, ["status", "--json", "--config", s.config, "--spool", s.spoolPath],
                    environment: s.environment())
                delivery = (try? JSONParser.parse(status?.stdout.trimmingASCIIWhitespace() ?? ""))?["api"]
                return delivery?["state"] == .string("paused")
            })
        #expect(delivery?["reason"]?.stringValue?.contains("elsewhere.example") == true)
        try s.api.setMode("ok")
        bridge.signal(SIGHUP)
        #expect(try waitForDrain(s, timeout: 30)[.delivered] == 4)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        #expect(bridge.stderrText.components(separatedBy: "delivery paused").count - 1 == 1)
    }

    /// Hardening finding 5: with `http_proxy` set, a plain-http loopback API must not be reached through the
    /// proxy (which would see the token in clear). A listening fake proxy on loopback records any connection.
    @Test func plainHTTPNeverGoesThroughAProxy() throws {
        let s = try setup()
        defer { s.teardown() }
        let proxy = try ListeningSocket()
        defer { proxy.close() }
        var environment = s.environment()
        environment["http_proxy"] = "http://127.0.0.1:\(proxy.port)"
        environment["HTTP_PROXY"] = environment["http_proxy"]
        environment["all_proxy"] = environment["http_proxy"]
        let result = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=Px&p=1", "--config", s.config, "--spool", s.spoolPath],
            environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try JSONParser.parse(result.stdout.trimmingASCIIWhitespace())["state"] == .string("delivered"))
        #expect(try s.api.requests().count == 1)
        #expect(proxy.acceptedConnections() == 0)
    }

    /// The installed-service issue: a reload that adds `api.url` starts delivery (the pending backlog reaches the
    /// API), and one that removes it stops delivery (new scans stay pending).
    @Test func reloadAddingAndRemovingTheAPIURLStartsAndStopsDelivery() throws {
        let s = try setup()
        defer { s.teardown() }
        let local = s.dir.file("local.json")
        try #"{"nfc": {"enabled": false}, "hid": {"enabled": false}, "location": {"enabled": false}}"#
            .write(toFile: local, atomically: true, encoding: .utf8)
        let withAPI = try String(contentsOfFile: s.config, encoding: .utf8)
        let live = s.dir.file("live.json")
        try FileManager.default.copyItem(atPath: local, toPath: live)
        _ = try spoolBacklog(s, identifiers: ["A", "B"], perIdentifier: 2)
        let bridge = try RunningProcess(
            binary, ["run", "--config", live, "--spool", s.spoolPath], environment: s.environment())
        defer { bridge.stop() }
        #expect(bridge.waitForLogLine(timeout: 10) { $0.contains("ready") } != nil)
        #expect(try s.api.requests().isEmpty)
        try withAPI.write(toFile: live, atomically: true, encoding: .utf8)
        bridge.signal(SIGHUP)
        #expect(bridge.waitForLogLine(timeout: 10) { $0.contains("delivery started") } != nil)
        #expect(try waitForDrain(s, timeout: 30)[.delivered] == 4)
        try FileManager.default.removeItem(atPath: live)
        try FileManager.default.copyItem(atPath: local, toPath: live)
        bridge.signal(SIGHUP)
        #expect(bridge.waitForLogLine(timeout: 10) { $0.contains("delivery stopped") } != nil)
        let before = try s.api.requests().count
        let scan = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=C&p=1", "--config", live, "--spool", s.spoolPath],
            environment: s.environment())
        #expect(scan.status == 0)
        // The running bridge notices the new row at once (the spool watch); with delivery stopped it sends
        // nothing (the stand-in's long-poll waits for a request that must not come).
        #expect(try s.api.requests(min: before + 1, wait: 4).count == before)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }
}
