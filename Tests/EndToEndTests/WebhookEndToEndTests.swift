import BridgeCore
import BridgeTestSupport
import Foundation
import Platform
import Spool
import Testing

/// The real bridge (`run`) POSTing to the webhook receiver stand-in through its faults: every scan is taken at
/// least once, none is lost, each request is signed and keyed as docs/contracts.md ("Webhook request") says.
@Suite(.serialized)
struct WebhookEndToEndTests {
    let binary = Products.path("plings-bridge")

    struct Rig {
        let receiver: WebhookReceiver
        let dir = TemporaryDirectory("webhook-e2e")
        let config: String
        var spoolPath: String { dir.file("spool.sqlite") }
        var environment: [String: String] { Products.isolatedEnvironment(home: dir.path) }

        init(batchSize: Int = 1, timeout: Double = 1, tokenFile: String? = nil) throws {
            receiver = try WebhookReceiver()
            config = dir.file("config.json")
            try """
            {"webhook": {"url": "\(receiver.url)", "tokenFile": "\(tokenFile ?? receiver.tokenFile)",
                         "secretFile": "\(receiver.secretFile)", "timeout": \(timeout), "batchSize": \(batchSize)},
             "nfc": {"enabled": false}, "hid": {"enabled": false}, "location": {"enabled": false}}
            """.write(toFile: config, atomically: true, encoding: .utf8)
        }

        /// Commits `count` scans in one transaction, as another process does (`scan`): the running bridge is woken
        /// by the spool's change, not by its own pipeline. (Scans committed before the bridge first registered the
        /// sink are not queued for it: enabling a sink does not replay history.)
        /// Commits `count` scans of `identifiers` identifiers in turn.
        func commit(_ count: Int, tag: String, identifiers: Int = 25) throws -> [String] {
            let spool = try Spool(path: spoolPath)
            let builder = ScanBuilder(parser: PlingsURLParser())
            let letters = Array("abcdefghijkmnopqrstuvwxyz")
            let scans = (0..<count).map { n in
                let raw = "https://s.plings.io/?t=q&i=\(tag)\(letters[n % min(identifiers, letters.count)])&p=1.\(n)"
                return builder.build(Read(sourceKind: .manual, device: "e2e", raw: raw, time: Date()), fix: nil)
            }
            try spool.insert(scans)
            return scans.map(\.id)
        }

        /// The sink's queue once nothing is pending (the bridge records an answer just after the receiver sent it).
        func drainedQueue(timeout: Double = 10) throws -> SinkStats? {
            let spool = try Spool(path: spoolPath)
            let deadline = MonotonicClock.deadline(after: timeout)
            while true {
                let queue = try spool.sinkStats().first { $0.name == "webhook" }
                if queue?.pending == 0 || MonotonicClock.now() > deadline { return queue }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }

        func startBridge() throws -> RunningProcess {
            let bridge = try RunningProcess(
                Products.path("plings-bridge"), ["run", "--config", config, "--spool", spoolPath],
                environment: environment)
            guard bridge.waitForLogLine(timeout: 20, where: { $0.contains("ready: waiting for reads") }) != nil else {
                throw RigError("the bridge did not start: \(bridge.stderrText)")
            }
            return bridge
        }

        /// Waits (bounded) until the receiver took every id in `ids`.
        func awaitTaken(_ ids: [String], timeout: Double) throws -> Bool {
            let deadline = MonotonicClock.deadline(after: timeout)
            while MonotonicClock.now() < deadline {
                if Set(ids).isSubset(of: Set(try receiver.taken())) { return true }
                _ = try receiver.requests(min: try receiver.requests().count + 1, wait: 0.5)
            }
            return false
        }

        /// Every try of a request carried the same bytes as its first (docs/contracts.md, "Webhook request": the
        /// body is the read, not its delivery state), and at least one key was sent more than once, so the check
        /// compared something. Receivers that compare the body per key (Stripe's rule) accept such a retry.
        func everyKeyCarriedOneBody(_ requests: [WebhookRequest]) -> Bool {
            let bodies = Dictionary(grouping: requests.filter { $0.error == nil }, by: { $0.key ?? "" })
                .mapValues { Set($0.map { $0.bodyDigest ?? "" }) }
            let repeated = Dictionary(grouping: requests, by: { $0.key ?? "" }).values.contains { $0.count > 1 }
            return repeated && bodies.values.allSatisfy { $0.count == 1 }
        }

        func teardown() {
            receiver.stop()
            dir.remove()
        }
    }

    /// 500s, answers slower than the timeout, an outage (connections refused), and the bridge SIGKILLed while a
    /// request is out: afterwards every scan was taken, every request carried a valid signature and token and the
    /// scan's id as its key, the queue is empty, and `status` shows the sink delivering.
    @Test func everyScanArrivesAtLeastOnceThroughFaultsAndAKill() throws {
        let rig = try Rig()
        defer { rig.teardown() }
        var all: [String] = []
        var bridge = try rig.startBridge()
        defer { bridge.stop() }

        try rig.receiver.setMode("500")
        all += try rig.commit(4, tag: "Fa")
        #expect(try rig.receiver.requests(min: 2, wait: 15).count >= 2)
        try rig.receiver.setMode("ok")
        #expect(try rig.awaitTaken(all, timeout: 30))

        try rig.receiver.setMode("slow", ["delay": 2])
        all += try rig.commit(3, tag: "Sl")
        #expect(try rig.receiver.requests(min: all.count + 3, wait: 15).count >= all.count + 3)
        try rig.receiver.setMode("ok")
        #expect(try rig.awaitTaken(all, timeout: 30))

        try rig.receiver.goAway()
        all += try rig.commit(5, tag: "Out")
        #expect(bridge.waitForLogLine(timeout: 15, where: { $0.contains("webhook: delivery failing") }) != nil)
        try rig.receiver.comeBack()
        #expect(try rig.awaitTaken(all, timeout: 60))

        // A request is out (the receiver holds it) when the bridge dies: it is sent again by the next one.
        try rig.receiver.setMode("slow", ["delay": 0.8])
        let before = try rig.receiver.requests().count
        all += try rig.commit(2, tag: "Kil")
        _ = try rig.receiver.requests(min: before + 1, wait: 15)
        bridge.signal(SIGKILL)
        _ = bridge.waitForExit(timeout: 5)
        try rig.receiver.setMode("ok")
        bridge = try rig.startBridge()
        #expect(try rig.awaitTaken(all, timeout: 60))

        let requests = try rig.receiver.requests()
        #expect(requests.allSatisfy { $0.error == nil }, "\(requests.compactMap(\.error))")
        #expect(requests.allSatisfy { $0.signature == true })
        #expect(requests.allSatisfy { $0.key != nil && $0.key == $0.expectedKey && !$0.batch })
        #expect(rig.everyKeyCarriedOneBody(requests))
        #expect(Set(try rig.receiver.taken()) == Set(all))
        let queue = try #require(try rig.drainedQueue())
        #expect(queue.pending == 0 && queue.delivered == all.count && queue.refused == 0, "\(queue)")
        let status = try ProcessRunner.run(
            binary, ["status", "--json", "--config", rig.config, "--spool", rig.spoolPath],
            environment: rig.environment)
        let webhook = try JSONParser.parse(status.stdout)["webhook"]
        #expect(webhook?["state"]?.stringValue == "delivering")
        #expect(webhook?["url"]?.stringValue == rig.receiver.url)
        #expect(!bridge.stderrText.contains(rig.receiver.secret) && !bridge.stderrText.contains(rig.receiver.token))

        // A webhook-only site (issue 56): what the receiver took is delivered, nothing pending, and the purge
        // removes it (before, every scan stayed pending for an API that was never configured).
        func cli(_ arguments: [String]) throws -> ProcessResult {
            try ProcessRunner.run(
                binary, arguments + ["--config", rig.config, "--spool", rig.spoolPath], environment: rig.environment)
        }
        // (The tags with an `O` or an `l` are not base58: those reads are unrecognized, posted all the same, and
        // never purged.)
        let unrecognized = try Spool(path: rig.spoolPath).list(state: .unrecognized).map(\.id)
        let recognized = all.count - unrecognized.count
        let counts = try JSONParser.parse(Array(try cli(["spool", "stats", "--json"]).stdout.utf8))["counts"]
        #expect(counts?["pending"] == .integer(0) && counts?["delivered"] == .integer(recognized))
        #expect(recognized > 0 && counts?["unrecognized"] == .integer(unrecognized.count))
        let purged = try cli(["spool", "purge", "--delivered", "--older-than", "0"])
        #expect(purged.stdout.contains("purged \(recognized) delivered scan(s)"), "\(purged.stdout) \(purged.stderr)")
        #expect(try Spool(path: rig.spoolPath).list().map(\.id) == unrecognized)
    }

    /// Issue 56: a reload that changes the token reaches the running sink in place (no new runner, no restart
    /// line): the receiver refuses the first token (401: a pause), the operator writes the right one and sends
    /// SIGHUP, and the pause ends at once with every scan taken under the new token.
    @Test func aNewTokenReachesTheRunningSinkWithoutARestart() throws {
        let dir = TemporaryDirectory("webhook-token")
        defer { dir.remove() }
        let tokenFile = dir.file("token")
        try "not-the-receivers-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        let rig = try Rig(tokenFile: tokenFile)
        defer { rig.teardown() }
        let bridge = try rig.startBridge()
        defer { bridge.stop() }
        let ids = try rig.commit(3, tag: "Tok", identifiers: 3)
        #expect(bridge.waitForLogLine(timeout: 15, where: { $0.contains("webhook: delivery paused") }) != nil)
        #expect(try rig.receiver.taken().isEmpty)

        try "\(rig.receiver.token)\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        bridge.signal(SIGHUP)
        #expect(bridge.waitForLogLine(timeout: 15, where: { $0.contains("resumed: configuration reloaded") }) != nil)
        #expect(try rig.awaitTaken(ids, timeout: 15))
        let taken = try rig.receiver.requests().filter { $0.error == nil }
        #expect(!taken.isEmpty && taken.allSatisfy { $0.signature == true })
        // One sink the whole time: started once, never replaced or stopped.
        let started = bridge.stderrText.components(separatedBy: "scans also go to the webhook").count - 1
        #expect(started == 1, "\(bridge.stderrText)")
        #expect(!bridge.stderrText.contains(rig.receiver.token), "a token reached the log")
    }

    /// Batches: an array per request under the key of its ids; a batch the receiver refuses as too large goes
    /// again one scan at a time, and the one scan it refuses for good (422) is kept as refused, the rest taken.
    /// docs/contracts.md "Webhook request": a read `scan` commits while `webhook.url` is set is queued for the
    /// webhook even when no `run` has opened the spool yet (a fresh box), and is POSTed once the service starts.
    @Test func aReadScannedBeforeAnyRunIsPostedWhenTheServiceStarts() throws {
        let rig = try Rig()
        defer { rig.teardown() }
        let scanned = try ProcessRunner.run(
            Products.path("plings-bridge"),
            ["scan", "https://s.plings.io/?t=q&i=FreshBox1&p=1", "--config", rig.config, "--spool", rig.spoolPath],
            environment: rig.environment)
        #expect(scanned.status == 0)
        let id = try JSONParser.parse(Array((scanned.stdoutLines.last ?? "").utf8))["id"]?.stringValue ?? ""
        #expect(try Spool(path: rig.spoolPath).sinkStats().first { $0.name == "webhook" }?.pending == 1)
        let bridge = try rig.startBridge()
        defer { bridge.stop() }
        #expect(try rig.awaitTaken([id], timeout: 15))
        #expect(try rig.drainedQueue()?.delivered == 1)
    }

    @Test func batchesAreKeyedAndARefusedScanIsKeptAsRefused() throws {
        let rig = try Rig(batchSize: 4, timeout: 5)
        defer { rig.teardown() }
        let bridge = try rig.startBridge()
        defer { bridge.stop() }
        // The ids are made before the commit, so the receiver knows which one to refuse.
        try rig.receiver.setMode("500")
        let ids = try rig.commit(10, tag: "Bt", identifiers: 3)
        _ = try rig.receiver.requests(min: 1, wait: 10)
        try rig.receiver.setMode("413-batch", ["refuse": [ids[5]]])
        var rest = ids
        rest.remove(at: 5)
        #expect(try rig.awaitTaken(rest, timeout: 30))
        #expect(
            bridge.waitForLogLine(timeout: 10, where: { $0.contains("refused for good") && $0.contains(ids[5]) }) != nil
        )
        let requests = try rig.receiver.requests()
        #expect(requests.allSatisfy { $0.batch && $0.key == $0.expectedKey && $0.signature == true })
        #expect(rig.everyKeyCarriedOneBody(requests))
        #expect(requests.contains { $0.ids.count > 1 && $0.status == 413 })
        #expect(Set(try rig.receiver.taken()) == Set(rest))
        // Capture order per identifier (docs/contracts.md, "Webhook request"): the scans of each were taken oldest
        // first. The scans take the identifiers in turn, so the n-th is of identifier n % 3.
        let order = try rig.receiver.taken()
        for identifier in 0..<3 {
            let captured = rest.filter { (ids.firstIndex(of: $0) ?? 0) % 3 == identifier }
            #expect(order.filter(captured.contains) == captured)
        }
        let queue = try #require(try rig.drainedQueue())
        #expect(queue.pending == 0 && queue.delivered == 9 && queue.refused == 1, "\(queue)")

        // docs/contracts.md "Command line": `spool retry --dead --sink webhook` revives what the webhook refused,
        // and the running bridge sends it again (the receiver now takes it). An unknown sink is a usage error.
        try rig.receiver.setMode("ok")
        func retry(_ extra: [String]) throws -> ProcessResult {
            try ProcessRunner.run(
                binary, ["spool", "retry", "--dead"] + extra + ["--config", rig.config, "--spool", rig.spoolPath],
                environment: rig.environment)
        }
        let unknown = try retry(["--sink", "nowhere"])
        #expect(unknown.status == 2 && unknown.stderr.contains("no sink 'nowhere'"), "\(unknown.stderr)")
        let revived = try retry(["--sink", "webhook"])
        #expect(revived.status == 0 && revived.stdout.contains("revived 1 dead scan(s) for webhook"), "\(revived)")
        #expect(try rig.awaitTaken([ids[5]], timeout: 20))
        let after = try #require(try rig.drainedQueue())
        #expect(after.pending == 0 && after.delivered == 10 && after.refused == 0, "\(after)")
    }
}
