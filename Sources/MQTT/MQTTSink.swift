import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// Publishes every scan queued for the `mqtt` sink in the spool (QoS 1, capture order) and the device's retained
/// health message, independently of the API forwarder (design: the spool is the source of truth; each sink has its
/// own delivery state).
///
/// Two threads, neither on the cooperative pool: the network thread runs libmosquitto (blocking in pselect on the
/// socket, reconnecting with backoff, sending held messages as PUBACKs free the `maxInflight` window), and the
/// publisher thread reads the spool, hands libmosquitto a few windows of scans and records PUBACKs.
///
/// Capture order across reconnects: libmosquitto keeps every QoS 1 message it was handed until its PUBACK (also
/// one handed over while the connection was down) and sends the unacknowledged ones again, in order, right after
/// the next CONNACK (`message__retry_check`, after our connect callback has run). So the sink never publishes a scan
/// a second time itself while its client lives: it keeps its in-flight set and cursor across a reconnect and holds
/// new scans back until the resent ones are acknowledged, so nothing newer can overtake them. (Republishing from the
/// spool's oldest unacknowledged scan, as this sink once did, put libmosquitto's resent newer scans ahead of older
/// ones whose PUBACK had arrived but was not yet recorded - out of capture order whenever the broker had lost those.)
/// A new client (start, SIGHUP) starts from the spool's oldest unacknowledged scan; repeats carry the same scan `id`
/// for consumers to drop.
public final class MQTTSink: Sendable {
    public static let sinkName = "mqtt"
    /// How long a refused login or a refused message pauses publishing (SIGHUP restarts the sink at once).
    public static let refusalPause: Double = 300
    /// Reconnect backoff: 1 s doubling to this, with jitter.
    public static let maxReconnectDelay: Double = 30
    /// Scans handed to libmosquitto at once, in windows of `maxInflight` (see `publisherLoop`).
    static let queuedWindows = 4
    /// A connection that lasted this long (seconds) was not a flap: the backoff starts again at 1 s.
    static let stableConnection: Double = 30

    public struct Stats: Sendable {
        public var published = 0
        public var acknowledged = 0
        public var connects = 0
    }

    /// Everything both threads share, in one `Monitor`.
    private struct State {
        var client: MQTTClient?
        var stopping = false
        var connected = false
        /// When the current connection was accepted (monotonic seconds), and how many connections in a row ended
        /// sooner than `stableConnection`.
        var connectedAt = -Double.infinity
        var shortConnections = 0
        /// Messages handed to libmosquitto and not yet acknowledged: mid -> seq. Kept across reconnects, since
        /// libmosquitto keeps (and resends) them.
        var inFlight: [Int32: Int] = [:]
        /// After a reconnect with messages in flight: no new ones until libmosquitto's resent ones are acknowledged.
        var holding = false
        var acks: [(mid: Int32, code: Int32)] = []
        /// Scans read from the spool, not yet handed to libmosquitto; `cursor` is the seq of the last one handed over.
        var buffer: [SinkItem] = []
        var cursor = 0
        var wakeRequested = true
        /// Bumped by every event, wake-up and stop, so the publisher's wait sees that something changed.
        var ticks = 0
        /// Starting (not yet connected), healthy (connected), failing or paused, and the reconnect backoff: the
        /// model every sink shares. Its failure count is the failed connects since the last stable connection.
        var health = SinkHealth(
            backoff: Backoff(base: 1, cap: MQTTSink.maxReconnectDelay), pauseDuration: MQTTSink.refusalPause,
            initial: .starting)
        var lastLog: String?
        var stats = Stats()
        var publishedStatus: String?
        /// Home Assistant's discovery messages published on this connection: topic -> payload.
        var publishedDiscovery: [String: String] = [:]
        /// When the status message is next looked at (monotonic seconds): after a wake-up (a commit, a change of a
        /// source or a sink) or a publish, at most once a second; never on a timer.
        var statusDue = -Double.infinity
        /// When it was last looked at.
        var statusLooked = -Double.infinity
        /// A change of the sink's error for the spool (`spool stats`, `status`), noted under the lock and written by
        /// `recordHealth()` outside it: a SQLite write may wait for another writer's lock, and must not hold the
        /// monitor (libmosquitto's network thread, the publisher and `status` all take it) meanwhile.
        var healthToRecord: (reason: String?, at: Date)?
        var offlineMid: Int32?
        var offlineAcked = false
        var networkRunning = false
        var publisherRunning = false

        func paused(at clock: Double) -> Bool { health.isPaused && !health.isOpen(at: clock) }
    }

    private let state = Monitor(State())
    /// Serialises `recordHealth()`'s spool writes (it counts them: a `Mutex<Void>` misleads ThreadSanitizer).
    private let healthWrites = Mutex(0)
    private let spool: Spool
    public let settings: MQTTSettings
    private let logger: Logger
    private let status: @Sendable () -> JSONValue
    /// Told after health changed (connected, failing, paused), outside the monitor: `status` follows at once.
    private let healthChanged: @Sendable () -> Void
    /// Told after acknowledged scans were recorded in the spool (its counts changed).
    private let delivered: @Sendable () -> Void

    /// - Parameter status: the health fields of the retained status message (`online` is added here).
    public init(
        spool: Spool, settings: MQTTSettings, logger: Logger, status: @escaping @Sendable () -> JSONValue,
        healthChanged: @escaping @Sendable () -> Void = {}, delivered: @escaping @Sendable () -> Void = {}
    ) {
        self.healthChanged = healthChanged
        self.delivered = delivered
        self.spool = spool
        self.settings = settings
        self.logger = logger
        self.status = status
    }

    /// Starting: not yet connected; healthy: connected and publishing.
    public var currentHealth: SinkHealth.State { state.withLock { $0.health.state } }
    public var currentStats: Stats { state.withLock { $0.stats } }

    /// The retained status payload; the last will is the same with `online: false`.
    func statusPayload(online: Bool) -> String {
        var members: [(String, JSONValue)] = [("online", .bool(online)), ("deviceId", .string(settings.deviceID))]
        if case .object(let fields) = status() { members += fields }
        if !online { members.append(("at", .string(Timestamp.format(Date())))) }
        return JSONValue.object(members).encoded()
    }

    /// Home Assistant's discovery messages (`mqtt.homeAssistant`), for the sources `status` names: each one that
    /// changed since this connection began, and an empty retained message for one no longer wanted (a source gone).
    private func publishDiscovery(_ client: MQTTClient) {
        guard let prefix = settings.homeAssistantPrefix else { return }
        var sources: [String] = []
        if case .object(let members)? = status()["sources"] { sources = members.map(\.0) }
        let discovery = HomeAssistantDiscovery(
            prefix: prefix, deviceID: settings.deviceID, topicBase: settings.topicBase, version: BridgeVersion.current)
        let wanted = Dictionary(
            discovery.messages(sources: sources).map { ($0.topic, $0.payload) }, uniquingKeysWith: { first, _ in first }
        )
        let previous = state.withLock { s in
            defer { s.publishedDiscovery = wanted }
            return s.publishedDiscovery
        }
        for (topic, payload) in wanted.sorted(by: { $0.key < $1.key }) where previous[topic] != payload {
            _ = client.publish(topic: topic, payload: Array(payload.utf8), retain: true)
        }
        for topic in previous.keys.sorted() where wanted[topic] == nil {
            _ = client.publish(topic: topic, payload: [], retain: true)
        }
    }

    /// Registers the sink in the spool and starts both threads. A configuration problem (unreadable TLS files) is
    /// thrown: scans are still queued for the sink and published once it is fixed.
    public func start() throws {
        do {
            try spool.registerSink(MQTTSink.sinkName)
        } catch {
            // A write at start can fail on a full disk; when an earlier start registered the sink, scans are
            // queued for it anyway and publishing them needs no write, so a restart mid-episode still publishes.
            let registered = (try? spool.sinkStats())?.first { $0.name == MQTTSink.sinkName }?.enabled == true
            guard registered else { throw error }
        }
        let will = MQTTClient.Will(
            topic: settings.statusTopic,
            payload: JSONValue.object([
                ("online", .bool(false)), ("deviceId", .string(settings.deviceID)),
                ("reason", .string("connection lost")),
            ]).encoded())
        let client = try MQTTClient(settings: settings, will: will) { [weak self] event in self?.handle(event) }
        state.withLock {
            $0.client = client
            $0.networkRunning = true
            $0.publisherRunning = true
        }
        let network = Thread { [self] in networkLoop(client) }
        network.name = "mqtt-network"
        network.start()
        let publisher = Thread { [self] in publisherLoop(client) }
        publisher.name = "mqtt"
        publisher.start()
    }

    /// A scan was committed, or the device's state changed: publish it now, and look at the status message.
    public func wake() {
        state.update {
            $0.wakeRequested = true
            $0.statusDue = min($0.statusDue, $0.statusLooked + 1)
            $0.ticks += 1
        }
    }

    /// Stops publishing, publishes `online: false` (retained) and disconnects cleanly, all by the monotonic
    /// `deadline`. Unacknowledged scans stay queued in the spool.
    public func stop(deadline: Double) {
        state.update {
            $0.stopping = true
            $0.ticks += 1
        }
        state.wait(until: deadline) { !$0.publisherRunning }
        let (client, wasConnected) = state.withLock { ($0.client, $0.connected) }
        guard let client else { return }
        if wasConnected {
            let (rc, mid) = client.publish(
                topic: settings.statusTopic, payload: Array(statusPayload(online: false).utf8), retain: true)
            if MQTTClient.isSuccess(rc) {
                state.withLock { $0.offlineMid = mid }
                state.wait(until: deadline) { $0.offlineAcked || !$0.connected }
            }
        }
        // Scans libmosquitto sent before the offline message were acknowledged before it, after the publisher had
        // stopped: record them, so the next start does not send them again.
        let now = Date()
        var acknowledged: [Int] = []
        state.withLock { takeAcks(&$0, into: &acknowledged, now: now) }
        try? spool.markSinkDelivered(MQTTSink.sinkName, seqs: acknowledged, now: now)
        recordHealth()
        client.disconnect()
        state.wait(until: deadline) { !$0.networkRunning }
        // A network thread still blocked in a connect keeps its client alive (it holds a reference).
        state.withLock { $0.client = nil }
    }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 2) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    // MARK: events (network thread)

    private func handle(_ event: MQTTEvent) {
        defer { recordHealth() }
        state.update { s in
            s.ticks += 1
            let now = Date()
            switch event {
            case .connack(let code):
                if code == 0 {
                    s.connected = true
                    s.connectedAt = MonotonicClock.now()
                    s.stats.connects += 1
                    // libmosquitto resends what is in flight once this callback returns: nothing new before those.
                    s.holding = !s.inFlight.isEmpty
                    s.wakeRequested = true
                    s.publishedStatus = nil
                    s.publishedDiscovery = [:]
                    s.statusDue = -Double.infinity
                    if !s.health.isHealthy {
                        note(&s, .info, "mqtt: connected; publishing", [("broker", settings.endpoint)])
                        _ = s.health.connected(clock: MonotonicClock.now())
                        s.healthToRecord = (nil, now)
                    }
                } else if MQTTClient.isAuthRefusal(code) {
                    let reason = "the broker refused the connection: \(MQTTClient.reason(code))"
                    _ = s.health.pause(reason: reason, now: now, clock: MonotonicClock.now())
                    note(
                        &s, .error,
                        "mqtt: publishing paused: \(reason); fix mqtt.usernameFile/passwordFile or the broker's ACL "
                            + "and send SIGHUP (retrying in 5 min)", [("broker", settings.endpoint)])
                    s.healthToRecord = (reason, now)
                } else {
                    fail(&s, "the broker refused the connection: \(MQTTClient.reason(code))", now: now)
                }
            case .disconnect(let code):
                // In-flight messages stay libmosquitto's (and ours) until their PUBACK on a later connection.
                if s.connected {
                    s.connected = false
                    if code != 0 && !s.stopping { connectionLost(&s, code: code, now: now) }
                }
            case .puback(let mid, let code):
                if mid == s.offlineMid { s.offlineAcked = true }
                s.acks.append((mid, code))
            case .log(let text):
                // TLS failures are told only here (while connecting); once connected, warnings change nothing.
                if !s.stopping, !s.connected { fail(&s, text, now: now) }
            }
        }
    }

    /// The broker or the network ended a working connection. A broker closes a connection whenever another client
    /// connects with the same client id (Mosquitto 2.0.11 without a word; MQTT v5 brokers may send DISCONNECT 0x8E,
    /// Session taken over): two bridges with one deviceId would take the session from each other every second.
    /// So after three connections in a row that each ended within `stableConnection`, the backoff keeps growing
    /// instead of restarting at 1 s, and the log names the likely cause. One short connection (a broker restart)
    /// changes nothing.
    private func connectionLost(_ s: inout State, code: Int32, now: Date) {
        let lasted = MonotonicClock.now() - s.connectedAt
        s.shortConnections = lasted < MQTTSink.stableConnection ? s.shortConnections + 1 : 0
        var reason = "connection lost: \(MQTTClient.describeDisconnect(code))"
        if s.shortConnections >= 3 {
            reason +=
                "; \(s.shortConnections) connections in a row ended within \(Int(MQTTSink.stableConnection)) s: is "
                + "another client connecting as \(settings.clientID)? Give each bridge its own mqtt.deviceId"
        } else {
            s.health.forgiveFailures()
        }
        fail(&s, reason, now: now)
    }

    /// Health turns to failing: logged once when publishing starts failing, not once per retry; the reason shown by
    /// `status` and `spool stats` follows the latest failure.
    private func fail(_ s: inout State, _ reason: String, now: Date) {
        let clock = MonotonicClock.now()
        if s.paused(at: clock) || s.health.reason == reason { return }
        if s.health.noteFailure(reason: reason, now: now, clock: clock, keepFirstReason: false) != nil {
            note(
                &s, .warn, "mqtt: cannot publish: scans stay queued and are published when the broker is back",
                [("reason", reason), ("broker", settings.endpoint)])
        }
        s.healthToRecord = (reason, now)
    }

    /// Pauses publishing for `refusalPause` (a refused message, or one libmosquitto would not take).
    private func pause(_ s: inout State, _ reason: String, now: Date) {
        _ = s.health.pause(reason: reason, now: now, clock: MonotonicClock.now())
        note(
            &s, .error,
            "mqtt: publishing paused: \(reason); check the broker's ACL for \(settings.topicBase)/# and send SIGHUP "
                + "(retrying in 5 min)", [])
        s.healthToRecord = (reason, now)
    }

    /// Writes the sink's latest error change, if one was noted, outside the monitor. Taking and writing happen
    /// under `healthWrites`, so two threads cannot write an older change after a newer one.
    private func recordHealth() {
        let recorded = healthWrites.withLock { writes -> Bool in
            let noted = state.withLock { s -> (reason: String?, at: Date)? in
                defer { s.healthToRecord = nil }
                return s.healthToRecord
            }
            guard let noted else { return false }
            writes += 1
            try? spool.recordSinkError(MQTTSink.sinkName, noted.reason, now: noted.at)
            return true
        }
        if recorded { healthChanged() }
    }

    private func note(_ s: inout State, _ level: LogLevel, _ message: String, _ fields: [(String, String)]) {
        let key = message + fields.map { $0.1 }.joined()
        guard key != s.lastLog else { return }
        s.lastLog = key
        logger.log(level, message, fields)
    }

    // MARK: network thread

    private func networkLoop(_ client: MQTTClient) {
        var rc = client.connect(host: settings.host, port: settings.port, keepalive: settings.keepalive)
        // The loop blocks in pselect until traffic, a publish, or half the keepalive (for PINGREQ); never polls.
        let timeout = Int32(max(1000, min(30_000, settings.keepalive * 500)))
        while true {
            if MQTTClient.isSuccess(rc) {
                rc = client.loop(timeoutMilliseconds: timeout)
                if MQTTClient.isSuccess(rc) { continue }
            }
            let until: Double? = state.update { s in
                if s.stopping { return nil }
                s.ticks += 1
                let clock = MonotonicClock.now()
                if s.paused(at: clock) { return s.health.notBefore ?? clock }
                // A more specific reason (CONNACK, a TLS error from the log) may already be known: keep it.
                if !s.connected, case .failing = s.health.state {
                } else if !s.connected {
                    fail(&s, MQTTClient.describe(rc), now: Date())
                }
                // 1 s doubling to `maxReconnectDelay`, each wait at least 3/4 of that.
                return clock + s.health.scheduleRetry(clock: clock, random: 0.75 + 0.25 * Double.random(in: 0...1))
            }
            recordHealth()
            guard let until else { break }
            state.wait(until: until) { $0.stopping }
            if state.withLock({ $0.stopping }) { break }
            rc = client.reconnect()
        }
        state.update {
            $0.connected = false
            $0.networkRunning = false
            $0.ticks += 1
        }
    }

    // MARK: publisher thread

    /// What the publisher thread does next, decided under the lock and done outside it.
    private enum Step {
        case record([Int])
        case read(after: Int)
        case publish([SinkItem])
        case status
        case wait(until: Double, ticks: Int)
        case stop
    }

    private func publisherLoop(_ client: MQTTClient) {
        // How many scans libmosquitto holds at once. It puts at most `maxInflight` on the wire (its send maximum) and
        // sends the next held one from its own network thread as each PUBACK arrives; holding only the window would
        // make every message wait for this thread to wake and hand it over. A queue of a few windows keeps the wire
        // full without a hop, and stays short enough that the offline status sent at a clean stop, queued behind
        // it, is acknowledged well within the stop deadline. Order is libmosquitto's queue order, also across a
        // reconnect (see the type's comment).
        let holdLimit = settings.maxInflight * MQTTSink.queuedWindows
        // Acknowledged scans not yet recorded: written once libmosquitto holds its fill again, in batches.
        var toRecord: [Int] = []
        var recordFailing = false
        while true {
            recordHealth()
            let clock = MonotonicClock.now()
            let now = Date()
            let step: Step = state.withLock { s in
                if s.stopping { return .stop }
                if !s.acks.isEmpty { takeAcks(&s, into: &toRecord, now: now) }
                if s.health.isPaused, s.health.isOpen(at: clock) {
                    // The pause is over: start again from the oldest scan not acknowledged.
                    s.health.endPause(to: s.connected ? .healthy : .starting)
                    s.buffer.removeAll()
                    s.cursor = 0
                    s.wakeRequested = true
                }
                let paused = s.paused(at: clock)
                let canPublish =
                    s.connected && !paused && !s.holding && s.inFlight.count < holdLimit
                    && (s.wakeRequested || !s.buffer.isEmpty)
                // Refill what libmosquitto holds first, then record; a batch is written at the latest when nothing
                // is left to publish or 256 have gathered.
                if !toRecord.isEmpty, !canPublish || toRecord.count >= 256 {
                    defer { toRecord.removeAll() }
                    return .record(toRecord)
                }
                if s.connected, !paused, clock >= s.statusDue {
                    s.statusDue = .infinity
                    s.statusLooked = clock
                    return .status
                }
                if canPublish {
                    if s.buffer.isEmpty {
                        s.wakeRequested = false
                        return .read(after: s.cursor)
                    }
                    return .publish(Array(s.buffer.prefix(holdLimit - s.inFlight.count)))
                }
                // Nothing on a timer: every event, wake-up and stop bumps `ticks`.
                var until = Double.infinity
                if s.connected, !paused { until = min(until, max(s.statusDue, clock + 0.05)) }
                if paused, let end = s.health.notBefore { until = min(until, end) }
                return .wait(until: until, ticks: s.ticks)
            }
            switch step {
            case .stop:
                try? spool.markSinkDelivered(MQTTSink.sinkName, seqs: toRecord, now: Date())
                recordHealth()
                state.update {
                    $0.publisherRunning = false
                    $0.ticks += 1
                }
                return
            case .record(let seqs):
                do {
                    try spool.markSinkDelivered(MQTTSink.sinkName, seqs: seqs, now: now)
                    delivered()
                    if recordFailing {
                        recordFailing = false
                        logger.info("mqtt: acknowledged scans are recorded again")
                    }
                } catch {
                    // A full disk: keep them (libmosquitto no longer holds them, so nothing would send them
                    // again before a restart) and try again in a second; logged once per episode.
                    if !recordFailing {
                        recordFailing = true
                        logger.error(
                            "mqtt: cannot record acknowledged scans; retrying", [("error", error.description)])
                    }
                    toRecord = seqs + toRecord
                    state.wait(until: MonotonicClock.deadline(after: 1)) { $0.stopping }
                }
            case .status:
                let text = statusPayload(online: true)
                let changed = state.withLock { s in
                    defer { s.publishedStatus = text }
                    return s.publishedStatus != text
                }
                if changed { _ = client.publish(topic: settings.statusTopic, payload: Array(text.utf8), retain: true) }
                publishDiscovery(client)
            case .read(let after):
                do {
                    let page = try spool.pendingForSink(MQTTSink.sinkName, afterSeq: after, limit: 500)
                    state.withLock { s in
                        guard s.cursor == after, s.buffer.isEmpty else { return }
                        s.buffer = page
                        if page.count == 500 { s.wakeRequested = true }
                    }
                } catch {
                    // Disk trouble: try again in a second.
                    logger.error("mqtt: cannot read the spool", [("error", error.description)])
                    state.wait(until: MonotonicClock.deadline(after: 1)) { $0.stopping }
                    state.withLock { $0.wakeRequested = true }
                }
            case .publish(let batch):
                publish(batch, client: client, clock: clock, now: now)
            case .wait(let until, let ticks):
                // Other processes' commits (`scan`, `spool retry`) come as wake-ups too (`SpoolChangeWatch`).
                state.wait(until: until) { $0.stopping || $0.ticks != ticks }
            }
        }
    }

    /// Takes the PUBACKs that arrived: the scans acknowledged go to `toRecord`; a refusal pauses publishing.
    private func takeAcks(_ s: inout State, into toRecord: inout [Int], now: Date) {
        var delivered: [Int] = []
        var refusal: Int32?
        for (mid, code) in s.acks {
            // Not ours: the status message.
            guard let seq = s.inFlight.removeValue(forKey: mid) else { continue }
            if code < 0x80 { delivered.append(seq) } else { refusal = code }
        }
        s.acks.removeAll()
        if s.inFlight.isEmpty { s.holding = false }
        s.stats.acknowledged += delivered.count
        toRecord += delivered
        if let refusal { pause(&s, "the broker refused a message: \(MQTTClient.reason(refusal))", now: now) }
    }

    /// Hands `batch` (the front of the buffer) to libmosquitto, in order, and registers what it now holds.
    private func publish(_ batch: [SinkItem], client: MQTTClient, clock: Double, now: Date) {
        var held: [(Int32, Int)] = []
        var taken = 0
        var failure: Int32?
        for item in batch {
            let payload = Array(item.record.json().encoded().utf8)
            let (rc, mid) = client.publish(topic: settings.topic(for: item.record), payload: payload)
            if MQTTClient.isSuccess(rc) || MQTTClient.isQueuedWithoutConnection(rc) {
                // Without a connection libmosquitto keeps the message and sends it after the next CONNACK.
                held.append((mid, item.seq))
            } else if MQTTClient.isOversize(rc) {
                let reason = "scan \(item.record.id) is larger than the broker accepts (\(payload.count) bytes)"
                logger.error("mqtt: scan not publishable; kept in the spool as refused", [("reason", reason)])
                try? spool.markSinkRefused(MQTTSink.sinkName, seq: item.seq, reason: reason, now: now)
            } else {
                failure = rc
                break
            }
            taken += 1
            if MQTTClient.isQueuedWithoutConnection(rc) { break }
        }
        state.withLock { s in
            s.buffer.removeFirst(min(taken, s.buffer.count))
            if taken > 0 { s.cursor = batch[taken - 1].seq }
            for (mid, seq) in held { s.inFlight[mid] = seq }
            s.stats.published += held.count
            // The next look at the status message comes within a second (its spool figures changed).
            s.statusDue = min(s.statusDue, clock + 1)
            if let failure {
                // Not taken by libmosquitto (e.g. the broker allows no QoS 1): retrying at once would spin.
                pause(&s, "libmosquitto did not take a message: \(MQTTClient.describe(failure))", now: now)
            }
        }
    }
}
