import BridgeCore
import BridgeTestSupport
import Foundation
import Platform
import Spool
import Testing

/// The real bridge against a real Mosquitto broker (started per test on a free loopback port, own config file).
@Suite(.serialized)
struct MQTTTests {
    let binary = Products.path("plings-bridge")

    struct Setup {
        let dir: TemporaryDirectory
        let config: String
        var spoolPath: String { dir.file("spool.sqlite") }
        var base: String { "plings/site1/gate7" }

        func environment() -> [String: String] { Products.isolatedEnvironment(home: dir.path) }
    }

    /// A config with an `mqtt` section (`mqtt` members as JSON text) and optionally an `api` section.
    func setup(mqtt: String, api: String? = nil) throws -> Setup {
        let dir = TemporaryDirectory("mqtt")
        let config = dir.file("config.json")
        try """
        {"mqtt": {"site": "site1", "deviceId": "gate7", "keepalive": 5, \(mqtt)},
         \(api.map { "\"api\": {\($0)}," } ?? "")
         "metrics": {"textfile": "\(dir.file("metrics.prom"))", "interval": 1},
         "nfc": {"enabled": false}, "hid": {"enabled": false}, "location": {"enabled": false}}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return Setup(dir: dir, config: config)
    }

    func plain(_ broker: MosquittoRig) -> String { #""url": "\#(broker.url)", "allowInsecure": true"# }

    /// Scans spooled before the bridge runs, queued for the MQTT sink (as a running bridge would have queued them):
    /// identifier -> scan ids in capture order.
    func spoolBacklog(_ s: Setup, identifiers: [String], perIdentifier: Int) throws -> [String: [String]] {
        let spool = try Spool(path: s.spoolPath)
        try spool.registerSink("mqtt")
        let builder = ScanBuilder(parser: PlingsURLParser())
        var order: [String: [String]] = [:]
        var scans: [NewScan] = []
        var t = Date().addingTimeInterval(-3600)
        for n in 0..<perIdentifier {
            for identifier in identifiers {
                t = t.addingTimeInterval(0.01)
                let read = Read(
                    sourceKind: SourceKind("hid"), device: "bench",
                    raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1.\(n)", time: t
                )
                let scan = builder.build(read, fix: nil)
                scans.append(scan)
                order[identifier, default: []].append(scan.id)
            }
        }
        try spool.insert(scans)
        return order
    }

    func startBridge(_ s: Setup) throws -> RunningProcess {
        try RunningProcess(binary, ["run", "--config", s.config, "--spool", s.spoolPath], environment: s.environment())
    }

    func run(_ s: Setup, _ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run(
            binary, arguments + ["--config", s.config, "--spool", s.spoolPath], environment: s.environment())
    }

    /// The read a `spool export` line holds, without its delivery state (docs/contracts.md, "Scan messages": the
    /// fields a read fixed at its commit, in the record's order).
    func readOnly(_ exportLine: String) throws -> String {
        guard case .object(let fields) = try JSONParser.parse(Array(exportLine.utf8)) else { return "" }
        let delivery: Set = ["state", "attempts", "lastError", "deliveredAt", "nextAttemptAt", "response"]
        return JSONValue.object(fields.filter { !delivery.contains($0.0) }).encoded()
    }

    func sinkPending(_ s: Setup) throws -> Int {
        try Spool(path: s.spoolPath).sinkStats(named: "mqtt")?.pending ?? -1
    }

    /// The scan ids of the received `/scans` messages, in arrival order.
    func receivedIDs(_ subscriber: MQTTSubscriber, topic: String) -> [String] {
        subscriber.messages.filter { $0.topic == topic }.compactMap {
            (try? JSONParser.parse(Array($0.payload.utf8)))?["id"]?.stringValue
        }
    }

    /// Per identifier, the first arrival of each scan id, in arrival order (repeats after a reconnect dropped,
    /// as a consumer does by `id`).
    func firstArrivals(_ ids: [String], order: [String: [String]]) -> [String: [String]] {
        let identifierOf = Dictionary(uniqueKeysWithValues: order.flatMap { key, ids in ids.map { ($0, key) } })
        var seen = Set<String>()
        var result: [String: [String]] = [:]
        for id in ids where seen.insert(id).inserted {
            if let identifier = identifierOf[id] { result[identifier, default: []].append(id) }
        }
        return result
    }

    /// A broker that is down, whose saved session for a subscriber (to every `plings/gate7`-device scan) makes it
    /// queue messages from the moment it is started again, whoever reconnects first.
    func brokerDownWithWaitingSubscriber() throws -> (MosquittoRig, MQTTSubscriber) {
        let broker = try MosquittoRig(persistence: true)
        let subscriber = try MQTTSubscriber(
            port: broker.port, topic: "plings/site1/gate7/scans", session: "waiting-\(UUID().uuidString.prefix(8))")
        broker.saveSessions()
        broker.kill()
        return (broker, subscriber)
    }

    @Test func publishesEveryReadAsItsExportLineAndStatusOnlineThenOffline() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        let subscriber = try MQTTSubscriber(port: broker.port, topic: "plings/#")
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(
            subscriber.waitFor(timeout: 15) { t, p in t == s.base + "/status" && p.contains(#""online":true"#) } != nil)
        // Reads committed by another process (`scan`): the running bridge notices and publishes them.
        #expect(try run(s, ["scan", "https://s.plings.io/?t=q&i=Hx7k&p=2"]).status == 0)
        #expect(try run(s, ["scan", "not a plings url"]).status == 0)
        let scan = subscriber.waitFor(timeout: 15) { t, _ in t == s.base + "/scans" }
        let unrecognized = subscriber.waitFor(timeout: 15) { t, _ in t == s.base + "/unrecognized" }
        // The payload contract: byte for byte the read of that scan's `spool export` line, without its delivery state.
        let export = try run(s, ["spool", "export"]).stdoutLines
        #expect(export.count == 2)
        #expect(try scan == readOnly(export[0]))
        #expect(try unrecognized == readOnly(export[1]))
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
        // An MQTT-only site (issue 56): once the broker took them nothing is pending, and the purge removes the
        // delivered scan (the unrecognized read is never purged).
        let counts = try JSONParser.parse(Array(try run(s, ["spool", "stats", "--json"]).stdout.utf8))["counts"]
        #expect(counts?["pending"] == .integer(0) && counts?["delivered"] == .integer(1))
        #expect(counts?["unrecognized"] == .integer(1))
        let list = try run(s, ["spool", "list", "--json"]).stdoutLines
        #expect(list.allSatisfy { $0.contains(#""sinks":{"mqtt":"delivered"}"#) })
        let stats = try run(s, ["spool", "stats"]).stdout
        #expect(stats.contains("sink mqtt: 0 pending, 2 delivered"))
        // The status file is refreshed every few seconds.
        #expect(
            eventually(timeout: 15) {
                (try? run(s, ["status", "--json"]).stdout.contains(#""state":"publishing""#)) == true
            })
        // So is the metrics file: the broker sink's state, queue and counters.
        #expect(
            eventually(timeout: 10) {
                let text = (try? String(contentsOfFile: s.dir.file("metrics.prom"), encoding: .utf8)) ?? ""
                return text.contains("plings_bridge_mqtt_state{state=\"publishing\"} 1")
                    && text.contains("plings_bridge_mqtt_state{state=\"failing\"} 0")
                    && text.contains("plings_bridge_mqtt_pending 0")
                    && text.contains("plings_bridge_mqtt_acknowledged_total 2")
            })
        // A clean stop says offline itself (not the last will, which carries "connection lost").
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        let offline = subscriber.waitFor(timeout: 5) { t, p in t == s.base + "/status" && p.contains(#""online":false"#)
        }
        #expect(offline != nil && offline?.contains("connection lost") == false)
    }

    /// docs/configuration.md `mqtt`: every accepted read is published. Reads `scan` commits into a spool no `run`
    /// has opened yet (a fresh box) are accepted while the broker is configured, so they are queued for it and
    /// published once the service starts.
    @Test func readsScannedBeforeAnyRunArePublishedWhenTheServiceStarts() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        #expect(try run(s, ["scan", "https://s.plings.io/?t=q&i=Fresh1&p=2"]).status == 0)
        #expect(try run(s, ["scan", "not a plings url"]).status == 0)
        #expect(try run(s, ["spool", "stats"]).stdout.contains("sink mqtt: 2 pending, 0 delivered"))
        let subscriber = try MQTTSubscriber(port: broker.port, topic: "plings/#")
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        let scan = subscriber.waitFor(timeout: 15) { t, _ in t == s.base + "/scans" }
        let unrecognized = subscriber.waitFor(timeout: 15) { t, _ in t == s.base + "/unrecognized" }
        let export = try run(s, ["spool", "export"]).stdoutLines
        #expect(export.count == 2)
        #expect(scan?.contains(#""identifier":"Fresh1""#) == true)
        #expect(try unrecognized == readOnly(export[1]))
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
    }

    /// `spool retry --dead --sink mqtt` (docs/operations.md): scans the broker's sink had refused are published
    /// once revived, although the publisher had long passed their place in the spool (it reads on from the last
    /// scan it handed over); a salvage's copied-back scans take the same path.
    @Test func revivedScansBelowThePublishersPlaceArePublished() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        for n in 1...2 { #expect(try run(s, ["scan", "https://s.plings.io/?t=q&i=Refused\(n)&p=2"]).status == 0) }
        do {
            let spool = try Spool(path: s.spoolPath)
            for record in try spool.list(limit: 2) {
                try spool.ledger("mqtt").recordOutcome(
                    id: record.id, outcome: .dead(reason: "test: refused", response: ""), now: Date())
            }
        }
        for n in 3...4 { #expect(try run(s, ["scan", "https://s.plings.io/?t=q&i=Later\(n)&p=2"]).status == 0) }
        let subscriber = try MQTTSubscriber(port: broker.port, topic: "plings/#")
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(subscriber.waitFor(timeout: 15) { t, p in t == s.base + "/scans" && p.contains("Later4") } != nil)
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
        let revived = try run(s, ["spool", "retry", "--dead", "--sink", "mqtt"])
        #expect(revived.status == 0 && revived.stdout.contains("2"), "\(revived.stdout)\(revived.stderr)")
        for n in 1...2 {
            #expect(
                subscriber.waitFor(timeout: 15) { t, p in t == s.base + "/scans" && p.contains("Refused\(n)") } != nil,
                "revived scan \(n) not published")
        }
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
        // Each scan once: the revived ones were not in flight, the others not read again.
        let scans = subscriber.messages.filter { $0.topic == s.base + "/scans" }
        #expect(scans.count == 4, "\(scans.map(\.payload))")
    }

    @Test func brokerAbsentAtStartThenBacklogDrainsInOrder() throws {
        let (broker, subscriber) = try brokerDownWithWaitingSubscriber()
        defer { subscriber.stop() }
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        let order = try spoolBacklog(s, identifiers: ["Aa", "Bb", "Cc"], perIdentifier: 20)
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(bridge.process.isRunning)
        let failing = eventually(timeout: 10) {
            (try? run(s, ["status", "--json"]).stdout.contains(#""state":"failing""#)) == true
        }
        #expect(failing)
        #expect(
            eventually(timeout: 10) {
                let text = (try? String(contentsOfFile: s.dir.file("metrics.prom"), encoding: .utf8)) ?? ""
                return text.contains("plings_bridge_mqtt_state{state=\"failing\"} 1")
                    && text.contains("plings_bridge_mqtt_pending 60")
            })
        #expect(try sinkPending(s) == 60)
        try broker.start()
        #expect(eventually(timeout: 60) { subscriber.messages.count >= 60 })
        let ids = receivedIDs(subscriber, topic: s.base + "/scans")
        #expect(firstArrivals(ids, order: order) == order, "not in capture order per identifier")
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        let log = bridge.stderrText
        #expect(log.components(separatedBy: "mqtt: cannot publish").count - 1 == 1)
        #expect(log.contains("mqtt: connected; publishing"))
    }

    /// A reload with unchanged settings ends the reconnect backoff (docs/operations.md, "Reload"): the operator fixed
    /// the broker and says so, and the bridge connects at once instead of at the end of a wait of up to 30 s.
    ///
    /// The broker's port first takes each connection attempt and drops it, so the test sees every attempt instead of
    /// guessing them from the clock. Waits are 1 s doubling to 30 s (`MQTTTransport.maxReconnectDelay`), each 3/4 to all
    /// of it, one per failed attempt: after the sixth attempt (waits 1, 2, 4, 8 and 16 s before it) the wait is 30 s,
    /// so the seventh comes 22.5 s after the sixth at the earliest. The attempts are counted, not timed: a loaded
    /// machine delays when the port sees an attempt by seconds, and a gap read from those times once took an 8 s
    /// wait for the 16 s one (CI, twice). The broker returns then and the reload follows: only the reload can
    /// connect before that.
    @Test func aReloadEndsTheReconnectBackoffAtOnce() throws {
        let (broker, subscriber) = try brokerDownWithWaitingSubscriber()
        defer { subscriber.stop() }
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        _ = try spoolBacklog(s, identifiers: ["Ra", "Rb"], perIdentifier: 2)
        let port = try ListeningSocket(port: broker.port, reading: true)
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(bridge.waitForLogLine(timeout: 10) { $0.contains("mqtt: cannot publish") } != nil)
        // The bridge's attempts: their MQTT CONNECT names its client (the subscriber here retries every second).
        let client = Array("plings-bridge".utf8)
        func attempts() -> [Double] {
            port.connections().filter { connection in
                connection.first.indices.contains { connection.first[$0...].starts(with: client) }
            }.map(\.at)
        }
        let widened = eventually(timeout: 120) { attempts().count >= 6 }
        port.close()
        let lastAttempt = attempts().last ?? 0
        #expect(widened, "attempts at \(attempts()), first bytes \(port.connections().prefix(3).map(\.first))")
        try broker.start()
        bridge.signal(SIGHUP)
        let connected = bridge.waitForLogLine(timeout: 20) { $0.contains("mqtt: connected; publishing") }
        let connectedAt = MonotonicClock.now()
        #expect(connected != nil, "no connection within 20 s of the reload")
        #expect(connectedAt < lastAttempt + 22.5, "connected \(connectedAt - lastAttempt) s after the last attempt")
        // The reload found the sink waiting out its backoff (the runner logs this line only then, and ends
        // the wait), and the connection came after it.
        #expect(bridge.waitForLogLine(timeout: 10) { $0.contains("msg=\"configuration reloaded\"") } != nil)
        let log = bridge.stderrText
        let reloaded = log.range(of: "mqtt: configuration reloaded; connecting again now")
        let first = log.range(of: "mqtt: connected; publishing")
        #expect(
            reloaded != nil && first != nil && reloaded!.lowerBound < first!.lowerBound,
            "attempts at \(attempts()), last \(lastAttempt), connected at \(connectedAt): \(log)")
        #expect(eventually(timeout: 10) { (try? sinkPending(s)) == 0 })
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    /// Where, per identifier, the scans received (first arrivals; some may be missing) go back in capture order:
    /// one line for the first such place of each identifier ("Ka: #312 arrived after #340 ..."); empty when in order.
    func orderBreaks(_ ids: [String], order: [String: [String]]) -> [String] {
        firstArrivals(ids, order: order).sorted { $0.key < $1.key }.compactMap { identifier, received in
            let position = Dictionary(uniqueKeysWithValues: (order[identifier] ?? []).enumerated().map { ($1, $0) })
            let indices = received.compactMap { position[$0] }
            guard let k = indices.indices.dropFirst().first(where: { indices[$0] < indices[$0 - 1] }) else {
                return nil
            }
            return "\(identifier): #\(indices[k]) arrived after #\(indices[k - 1]) (arrival \(k) of \(indices.count))"
        }
    }

    /// The broker dies (SIGKILL) with a window of QoS 1 messages in flight and comes back on the same port. Once seen
    /// out of order in CI: the sink then republished from the spool's oldest unacknowledged scan while libmosquitto
    /// also resent its own in-flight messages first, so newer scans overtook older ones whose PUBACK had arrived but
    /// was not yet recorded (and which the dying broker had lost). Now a lost connection ends its libmosquitto client
    /// (nothing is resent behind the runner's back) and the runner sends every unacknowledged scan again from the
    /// spool, in capture order (`MQTTTransport`'s doc comment).
    @Test
    func brokerKilledAndRestartedMidBurstLosesNothingAndKeepsOrder() throws {
        let broker = try MosquittoRig(persistence: true)
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        let order = try spoolBacklog(s, identifiers: ["Ka", "Kb", "Kc", "Kd", "Ke"], perIdentifier: 600)
        // A persistent session, saved to disk, so the restarted broker queues for it even before it reconnects.
        let subscriber = try MQTTSubscriber(port: broker.port, topic: s.base + "/scans", session: "mqtt-test-sub")
        defer { subscriber.stop() }
        // Without the saved session the restarted broker would drop what is published before the subscriber is back.
        try #require(broker.saveSessions(), "mosquitto did not write its persistence database on SIGUSR1")
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(subscriber.waitForMessages(299, timeout: 30))
        broker.kill()
        // What the broker had not acknowledged when it died must all arrive after its restart. (What it had
        // acknowledged is the broker's to deliver; without its own persistence a SIGKILL may lose that.) Those are
        // the scans still queued once the PUBACKs read before the kill are recorded, and recorded as acknowledged
        // only after the restart: a PUBACK of the dying broker recorded late (a slow disk) is not the bridge's.
        #expect(eventually(timeout: 10) { bridge.stderrText.contains("mqtt: cannot publish") })
        func queued() throws -> [String] {
            try Spool(path: s.spoolPath).list(state: .pending, sink: "mqtt").map(\.id)
        }
        var unacknowledged = try queued()
        for _ in 0..<20 {
            usleep(250_000)
            let again = try queued()
            if again == unacknowledged { break }
            unacknowledged = again
        }
        #expect(unacknowledged.count > 0, "the kill came after the burst; make it larger")
        let restartedAt = Timestamp.format(Date())
        try broker.start()
        #expect(eventually(timeout: 60) { (try? sinkPending(s)) == 0 })
        let acknowledgedAfterRestart = try ProcessRunner.run(
            "/usr/bin/sqlite3",
            [
                s.spoolPath,
                "SELECT s.id FROM sink_queue AS q JOIN scans AS s ON s.seq = q.seq WHERE q.sink = 'mqtt' "
                    + "AND q.delivered_at >= '\(restartedAt)'",
            ]
        ).stdoutLines
        let owed = Set(unacknowledged).intersection(acknowledgedAfterRestart)
        #expect(owed.count > 0, "nothing was left to publish after the restart")
        let arrived = eventually(timeout: 20) {
            owed.subtracting(receivedIDs(subscriber, topic: s.base + "/scans")).isEmpty
        }
        let missing = owed.subtracting(receivedIDs(subscriber, topic: s.base + "/scans"))
        let firstMissing = unacknowledged.filter(missing.contains).prefix(3)
        // On failure, what the subscriber and the broker saw around the restart (seen under heavy load only).
        let lines = arrived ? [] : subscriber.process.outputLines
        let subscribedAt = lines.indices.filter { lines[$0] == "SUBSCRIBED" }
        let connects = lines.filter { $0.hasPrefix("CONNECTED") }
        let brokerLog = arrived ? "" : broker.log.suffix(40).joined(separator: "\n")
        #expect(
            arrived,
            """
            \(missing.count) of \(owed.count) scans unacknowledged at the kill never arrived (queued at the kill: \
            \(unacknowledged.count)); first missing: \(firstMissing); subscriber: \(lines.count) lines, \
            SUBSCRIBED at \(subscribedAt), \(connects); broker log: \(brokerLog)
            """)
        #expect(try Spool(path: s.spoolPath).sinkStats(named: "mqtt")?.delivered == 3000)
        let breaks = orderBreaks(receivedIDs(subscriber, topic: s.base + "/scans"), order: order)
        // On failure, where the scans queued at the kill sat in each identifier's order.
        let queuedAt = order.sorted { $0.key < $1.key }.map { identifier, ids in
            let positions = ids.indices.filter { unacknowledged.contains(ids[$0]) }
            return "\(identifier) #\(positions.first ?? -1)-#\(positions.last ?? -1)"
        }
        #expect(breaks.isEmpty, "\(breaks.joined(separator: "; ")); queued at the kill: \(queuedAt)")
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    /// A clean stop in the middle of a drain: libmosquitto holds a few windows of scans, sent ahead of the offline
    /// status; their PUBACKs arrive after the publisher has stopped and must still be recorded, or the next start
    /// sends them all again.
    @Test func cleanStopMidDrainRecordsEveryScanTheBrokerAcknowledged() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        _ = try spoolBacklog(s, identifiers: ["Sa", "Sb", "Sc", "Sd"], perIdentifier: 15000)
        let subscriber = try MQTTSubscriber(port: broker.port, topic: "plings/#")
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        // 310 scans (not any 300 messages: the status and discovery ones are among them), so the stop comes
        // mid-drain with at least 300 distinct scans received however slowly the bridge runs (ThreadSanitizer).
        var scans = 0
        #expect(
            subscriber.waitFor(timeout: 30) { topic, _ in
                if topic == s.base + "/scans" { scans += 1 }
                return scans >= 310
            } != nil)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 10) == 0)
        // The offline status comes after every scan the bridge sent: once it is here, so are they.
        #expect(
            subscriber.waitFor(timeout: 5) { t, p in t == s.base + "/status" && p.contains(#""online":false"#) }
                != nil)
        let received = Set(receivedIDs(subscriber, topic: s.base + "/scans"))
        let states = try Spool(path: s.spoolPath).sinkStates(ids: Array(received))
        let unrecorded = received.filter { states[$0]?["mqtt"] != "delivered" }
        #expect(received.count >= 300 && received.count < 60000, "the stop came after the drain; make it larger")
        #expect(
            unrecorded.count == 0,
            """
            \(unrecorded.count) of \(received.count) received scans not recorded as delivered; the bridge said: \
            \(bridge.stderrText.split(separator: "\n").suffix(8).joined(separator: " | "))
            """)
    }

    /// A hung broker (SIGSTOP) keeps the TCP connection open: only MQTT's keepalive notices. The log says so in
    /// words (libmosquitto 2.0.11 has no text for MOSQ_ERR_KEEPALIVE), and once the broker answers again the scans
    /// committed meanwhile are published.
    @Test func hungBrokerIsNoticedByKeepaliveAndTheBacklogFollows() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))  // keepalive 5 s
        defer { s.dir.remove() }
        let subscriber = try MQTTSubscriber(port: broker.port, topic: s.base + "/scans")
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(eventually(timeout: 10) { bridge.stderrText.contains("mqtt: connected; publishing") })
        broker.pause()
        #expect(try run(s, ["scan", "https://s.plings.io/?t=q&i=Hung1&p=1"]).status == 0)
        // libmosquitto pings after one keepalive of silence and gives up one keepalive later.
        #expect(
            eventually(timeout: 15) {
                bridge.stderrText.contains(
                    #"reason="connection lost: the broker did not answer a keepalive ping (mqtt.keepalive)""#)
            }, "\(bridge.stderrText)")
        #expect(!bridge.stderrText.contains("Unknown error"))
        #expect(try sinkPending(s) == 1)
        broker.resume()
        #expect(subscriber.waitFor(timeout: 40) { _, p in p.contains("Hung1") } != nil)
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
    }

    /// Two bridges with one deviceId (boxes cloned from one image keep one /etc/machine-id) share a client id, and a
    /// broker closes the older connection whenever the other connects (Mosquitto 2.0.11 says nothing; MQTT v5 brokers
    /// may send DISCONNECT 0x8E). Without care they take the session from each other every second, two log lines a
    /// second each. The bridge names the likely cause and backs off.
    @Test func twoBridgesWithOneDeviceIdAreNamedInTheLogAndBackOff() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        let first = try startBridge(s)
        defer { first.stop() }
        #expect(eventually(timeout: 10) { first.stderrText.contains("mqtt: connected; publishing") })
        let second = try RunningProcess(
            binary, ["run", "--config", s.config, "--spool", s.dir.file("other.sqlite")], environment: s.environment())
        defer { second.stop() }
        let hint =
            "connections in a row ended within 30 s: is another client connecting as plings-bridge-gate7? Give each "
            + "bridge its own mqtt.deviceId"
        let told = eventually(timeout: 20) { first.stderrText.contains(hint) || second.stderrText.contains(hint) }
        #expect(told, "\(first.stderrText)")
        func connects() -> Int {
            [first, second].map { $0.stderrText.components(separatedBy: "mqtt: connected; publishing").count - 1 }
                .reduce(0, +)
        }
        // From here each bridge waits 1, 2, 4, 8 s (less jitter) before taking the session back: at most 4 + 4
        // connects in 15 s, against one per second each before.
        let before = connects()
        usleep(15_000_000)
        #expect(connects() - before <= 8, "\(first.stderrText)")
    }

    @Test func wrongPasswordPausesWithAClearErrorLosesNothingAndSIGHUPResumes() throws {
        let dir = TemporaryDirectory("mqtt-users")
        defer { dir.remove() }
        let users = dir.file("passwords")
        let secret = "s3cret-\(UUID().uuidString.prefix(8))"
        let wrong = "wrong-\(UUID().uuidString.prefix(8))"
        try MosquittoRig.addUser("gate7", password: secret, file: users)
        try MosquittoRig.addUser("watcher", password: "watch", file: users)
        let broker = try MosquittoRig(listenerOptions: ["allow_anonymous false", "password_file \(users)"])
        try "gate7\n".write(toFile: dir.file("user"), atomically: true, encoding: .utf8)
        try (wrong + "\n").write(toFile: dir.file("password"), atomically: true, encoding: .utf8)
        try "watch\n".write(toFile: dir.file("watcher"), atomically: true, encoding: .utf8)
        let s = try setup(
            mqtt: plain(broker)
                + #", "usernameFile": "\#(dir.file("user"))", "passwordFile": "\#(dir.file("password"))""#)
        defer { s.dir.remove() }
        let order = try spoolBacklog(s, identifiers: ["Pa", "Pb"], perIdentifier: 5)
        let subscriber = try MQTTSubscriber(
            port: broker.port, topic: s.base + "/scans",
            extra: ["--username", "watcher", "--password-file", dir.file("watcher")])
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(eventually(timeout: 15) { bridge.stderrText.contains("mqtt: publishing paused") })
        let line = bridge.stderrText.split(separator: "\n").first { $0.contains("mqtt: publishing paused") } ?? ""
        // Mosquitto 2.0 answers a wrong password with CONNACK 0x87 "Not authorized" under MQTT v5.
        #expect(line.contains("refused the connection: Not authorized (0x87)"), "\(line)")
        #expect(try sinkPending(s) == 10)
        // status.json is rewritten every 5 s (docs/operations.md), so it may still show the state before the refusal.
        #expect(
            eventually(timeout: 10) {
                (try? run(s, ["status", "--json"]).stdout.contains(#""state":"paused""#)) == true
            })
        #expect(try run(s, ["spool", "stats"]).stdout.contains("last error: the broker refused the connection"))
        let doctor = try run(s, ["doctor"]).stdout
        #expect(doctor.contains("[fail] mqtt:") && doctor.contains("refused the login"), "\(doctor)")
        // Paused, not retrying every second: one refusal in the broker's log over two seconds.
        usleep(2_000_000)
        #expect(subscriber.messages.isEmpty)
        // Fixed and reloaded: everything goes, in order.
        try (secret + "\n").write(toFile: dir.file("password"), atomically: true, encoding: .utf8)
        bridge.signal(SIGHUP)
        #expect(subscriber.waitForMessages(10, timeout: 20))
        #expect(firstArrivals(receivedIDs(subscriber, topic: s.base + "/scans"), order: order) == order)
        #expect(try run(s, ["doctor"]).stdout.contains("[ok  ] mqtt:"))
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        let log = bridge.stderrText
        #expect(!log.contains(secret) && !log.contains(wrong))
        #expect(log.components(separatedBy: "mqtt: publishing paused").count - 1 == 1)
    }

    /// A test CA, and a server certificate for 127.0.0.1 signed by it (openssl, generated per test).
    func makeCertificates(_ dir: TemporaryDirectory, name: String, ip: String = "127.0.0.1") throws {
        let commands: [[String]] = [
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=\(name) test CA",
                "-keyout", dir.file("\(name)-ca.key"), "-out", dir.file("\(name)-ca.crt"),
            ],
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=\(ip)", "-keyout", dir.file("\(name)-server.key"),
                "-out", dir.file("\(name)-server.csr"),
            ],
            [
                "x509", "-req", "-in", dir.file("\(name)-server.csr"), "-CA", dir.file("\(name)-ca.crt"), "-CAkey",
                dir.file("\(name)-ca.key"), "-CAcreateserial", "-days", "2", "-extfile", dir.file("san.ext"),
                "-out", dir.file("\(name)-server.crt"),
            ],
        ]
        try "subjectAltName = IP:\(ip)\n".write(toFile: dir.file("san.ext"), atomically: true, encoding: .utf8)
        for arguments in commands {
            let result = try ProcessRunner.run("/usr/bin/openssl", arguments)
            guard result.status == 0 else { throw RigError("openssl \(arguments[0]) failed: \(result.stderr)") }
        }
    }

    @Test func tlsWithATestCAPublishesAndAnotherCAIsRefused() throws {
        let dir = TemporaryDirectory("mqtt-tls")
        defer { dir.remove() }
        try makeCertificates(dir, name: "good")
        try makeCertificates(dir, name: "other")
        let broker = try MosquittoRig(listenerOptions: [
            "allow_anonymous true", "cafile \(dir.file("good-ca.crt"))", "certfile \(dir.file("good-server.crt"))",
            "keyfile \(dir.file("good-server.key"))",
        ])
        let url = "mqtts://127.0.0.1:\(broker.port)"
        // Plain mqtt:// to a TLS listener, or TLS without a trusted CA, must not publish.
        let untrusted = try setup(mqtt: #""url": "\#(url)", "caFile": "\#(dir.file("other-ca.crt"))""#)
        defer { untrusted.dir.remove() }
        _ = try spoolBacklog(untrusted, identifiers: ["Ta"], perIdentifier: 2)
        let refused = try startBridge(untrusted)
        defer { refused.stop() }
        #expect(eventually(timeout: 15) { refused.stderrText.contains("mqtt: cannot publish") })
        #expect(refused.stderrText.lowercased().contains("certificate verify failed"), "\(refused.stderrText)")
        #expect(try sinkPending(untrusted) == 2)
        refused.signal(SIGTERM)
        #expect(refused.waitForExit(timeout: 5) == 0)

        let s = try setup(mqtt: #""url": "\#(url)", "caFile": "\#(dir.file("good-ca.crt"))""#)
        defer { s.dir.remove() }
        let order = try spoolBacklog(s, identifiers: ["Ta", "Tb"], perIdentifier: 3)
        let subscriber = try MQTTSubscriber(
            port: broker.port, topic: s.base + "/scans", extra: ["--cafile", dir.file("good-ca.crt")])
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(subscriber.waitForMessages(6, timeout: 20))
        #expect(firstArrivals(receivedIDs(subscriber, topic: s.base + "/scans"), order: order) == order)
        #expect(try run(s, ["doctor"]).stdout.contains("[ok  ] mqtt: mqtts://127.0.0.1"))
        bridge.signal(SIGTERM)
        // Once (a full run, the machine saturated) this bridge had not exited 5 s after SIGTERM: its log says where
        // the stop was.
        #expect(bridge.waitForExit(timeout: 5) == 0, "\(bridge.stderrText.suffix(3000))")
    }

    @Test func lastWillSaysOfflineAfterSIGKILL() throws {
        let broker = try MosquittoRig()
        let s = try setup(mqtt: plain(broker))
        defer { s.dir.remove() }
        let subscriber = try MQTTSubscriber(port: broker.port, topic: s.base + "/status")
        defer { subscriber.stop() }
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(subscriber.waitFor(timeout: 15) { _, p in p.contains(#""online":true"#) } != nil)
        bridge.signal(SIGKILL)
        _ = bridge.waitForExit(timeout: 5)
        let will = subscriber.waitFor(timeout: 15) { _, p in p.contains(#""online":false"#) }
        #expect(will?.contains("connection lost") == true)
        // Retained: a consumer that subscribes later learns the device is offline.
        let late = try MQTTSubscriber(port: broker.port, topic: s.base + "/status")
        defer { late.stop() }
        #expect(late.waitFor(timeout: 5) { _, p in p.contains(#""online":false"#) } != nil)
    }

    @Test func brokerDownWhileAPIUpAndTheReverseProgressIndependently() throws {
        let api = try APIStandIn()
        defer { api.stop() }
        let (broker, subscriber) = try brokerDownWithWaitingSubscriber()
        defer { subscriber.stop() }
        let s = try setup(
            mqtt: plain(broker),
            api: #""url": "\#(api.url)", "tokenFile": "\#(api.tokenFile)", "allowInsecureHTTP": true, "timeout": 2"#)
        defer { s.dir.remove() }
        // Broker down, API up: the API gets every scan while the broker's copies stay queued (so every scan is
        // still pending: the broker owes it).
        _ = try spoolBacklog(s, identifiers: ["Da", "Db"], perIdentifier: 5)
        let bridge = try startBridge(s)
        defer { bridge.stop() }
        #expect(eventually(timeout: 20) { (try? Spool(path: s.spoolPath).sinkStats(named: "api")?.delivered) == 10 })
        #expect(try sinkPending(s) == 10)
        #expect(try Spool(path: s.spoolPath).stats().counts[.pending] == 10)
        #expect(bridge.stderrText.contains("mqtt: cannot publish"))
        // The reverse: API failing, broker back: the broker gets every scan while the API's new one waits.
        try api.setMode("503")
        #expect(try run(s, ["scan", "https://s.plings.io/?t=q&i=Dc&p=1"]).status == 0)
        try broker.start()
        #expect(eventually(timeout: 40) { subscriber.messages.count >= 11 })
        #expect(eventually(timeout: 5) { (try? sinkPending(s)) == 0 })
        let counts = try Spool(path: s.spoolPath).stats().counts
        #expect(counts[.pending] == 1 && counts[.delivered] == 10)
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }
}
