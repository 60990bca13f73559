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
/// socket, reconnecting with backoff), and the publisher thread reads the spool, publishes up to `maxInflight`
/// unacknowledged messages and records PUBACKs. On every new connection publishing restarts from the oldest scan not
/// yet acknowledged, in capture order, so what the broker first sees of each identifier is in capture order;
/// repeats carry the same scan `id` for consumers to drop.
public final class MQTTSink: @unchecked Sendable {
    // `@unchecked Sendable`: every mutable property below is guarded by `condition`.
    public static let sinkName = "mqtt"
    /// How long a refused login or a refused message pauses publishing (SIGHUP restarts the sink at once).
    public static let refusalPause: Double = 300
    /// Reconnect backoff: 1 s doubling to this, with jitter.
    public static let maxReconnectDelay: Double = 30

    public enum Health: Sendable, Equatable {
        case connecting
        case connected
        case failing(reason: String, since: Date)
        case paused(reason: String, until: Date)
    }

    public struct Stats: Sendable {
        public var published = 0
        public var acknowledged = 0
        public var connects = 0
    }

    private let condition = MonotonicCondition()
    private let spool: Spool
    public let settings: MQTTSettings
    private let logger: Logger
    private let status: @Sendable () -> JSONValue
    private var client: MQTTClient?

    private var stopping = false
    private var connected = false
    private var generation = 0
    private var connectFailures = 0
    private var inFlight: [Int32: Int] = [:]  // mid -> seq
    private var acks: [(mid: Int32, code: Int32)] = []
    private var buffer: [SinkItem] = []
    private var cursor = 0
    private var wakeRequested = true
    private var health: Health = .connecting
    private var lastLog: String?
    private var stats = Stats()
    private var publishedStatus: String?
    /// When the status message is next looked at (monotonic seconds).
    private var statusDue = -Double.infinity
    /// When a pause ends (monotonic seconds); the `Date` in `Health.paused` is for display.
    private var pauseEnd = -Double.infinity
    private var offlineMid: Int32?
    private var offlineAcked = false
    private var networkRunning = false
    private var publisherRunning = false

    /// - Parameter status: the health fields of the retained status message (`online` is added here).
    public init(
        spool: Spool, settings: MQTTSettings, logger: Logger, status: @escaping @Sendable () -> JSONValue
    ) {
        self.spool = spool
        self.settings = settings
        self.logger = logger
        self.status = status
    }

    public var currentHealth: Health { condition.withLock { health } }
    public var currentStats: Stats { condition.withLock { stats } }

    /// The retained status payload; the last will is the same with `online: false`.
    func statusPayload(online: Bool) -> String {
        var members: [(String, JSONValue)] = [("online", .bool(online)), ("deviceId", .string(settings.deviceID))]
        if case .object(let fields) = status() { members += fields }
        if !online { members.append(("at", .string(Timestamp.format(Date())))) }
        return JSONValue.object(members).encoded()
    }

    /// Registers the sink in the spool and starts both threads. A configuration problem (unreadable TLS files) is
    /// thrown: scans are still queued for the sink and published once it is fixed.
    public func start() throws {
        try spool.registerSink(MQTTSink.sinkName)
        let will = MQTTClient.Will(
            topic: settings.statusTopic,
            payload: JSONValue.object([
                ("online", .bool(false)), ("deviceId", .string(settings.deviceID)),
                ("reason", .string("connection lost")),
            ]).encoded())
        let client = try MQTTClient(settings: settings, will: will) { [weak self] event in self?.handle(event) }
        condition.withLock {
            self.client = client
            networkRunning = true
            publisherRunning = true
        }
        let network = Thread { [self] in networkLoop(client) }
        network.name = "mqtt-network"
        network.start()
        let publisher = Thread { [self] in publisherLoop(client) }
        publisher.name = "mqtt"
        publisher.start()
    }

    /// A scan was committed: publish it now.
    public func wake() {
        condition.withLock {
            wakeRequested = true
            condition.broadcast()
        }
    }

    /// Stops publishing, publishes `online: false` (retained) and disconnects cleanly, all by the monotonic
    /// `deadline`. Unacknowledged scans stay queued in the spool.
    public func stop(deadline: Double) {
        condition.lock()
        stopping = true
        condition.broadcast()
        while publisherRunning, condition.wait(until: deadline) {}
        let client = self.client
        let wasConnected = connected
        condition.unlock()
        guard let client else { return }
        if wasConnected {
            let (rc, mid) = client.publish(
                topic: settings.statusTopic, payload: Array(statusPayload(online: false).utf8), retain: true)
            condition.lock()
            if MQTTClient.isSuccess(rc) {
                offlineMid = mid
                while !offlineAcked, connected, condition.wait(until: deadline) {}
            }
            condition.unlock()
        }
        client.disconnect()
        condition.lock()
        while networkRunning, condition.wait(until: deadline) {}
        // A network thread still blocked in a connect keeps its client alive (it holds a reference).
        self.client = nil
        condition.unlock()
    }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 2) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    // MARK: events (network thread)

    private func handle(_ event: MQTTEvent) {
        condition.lock()
        defer { condition.unlock() }
        let now = Date()
        switch event {
        case .connack(let code):
            if code == 0 {
                connected = true
                generation += 1
                connectFailures = 0
                stats.connects += 1
                inFlight.removeAll()
                acks.removeAll()
                buffer.removeAll()
                cursor = 0
                wakeRequested = true
                publishedStatus = nil
                statusDue = -Double.infinity
                if health != .connected {
                    note(.info, "mqtt: connected; publishing", [("broker", settings.endpoint)])
                    health = .connected
                    try? spool.recordSinkError(MQTTSink.sinkName, nil, now: now)
                }
            } else if MQTTClient.isAuthRefusal(code) {
                let reason = "the broker refused the connection: \(MQTTClient.reason(code))"
                health = .paused(reason: reason, until: now.addingTimeInterval(MQTTSink.refusalPause))
                pauseEnd = MonotonicClock.deadline(after: MQTTSink.refusalPause)
                note(
                    .error,
                    "mqtt: publishing paused: \(reason); fix mqtt.usernameFile/passwordFile or the broker's ACL and "
                        + "send SIGHUP (retrying in 5 min)", [("broker", settings.endpoint)])
                try? spool.recordSinkError(MQTTSink.sinkName, reason, now: now)
            } else {
                fail("the broker refused the connection: \(MQTTClient.reason(code))", now: now)
            }
        case .disconnect(let code):
            if connected {
                connected = false
                generation += 1
                inFlight.removeAll()
                acks.removeAll()
                buffer.removeAll()
                if code != 0 && !stopping { fail("connection lost: \(MQTTClient.describe(code))", now: now) }
            }
        case .puback(let mid, let code):
            if mid == offlineMid { offlineAcked = true }
            acks.append((mid, code))
        case .log(let text):
            // TLS failures are told only here (while connecting); once connected, warnings change nothing.
            if !stopping, !connected { fail(text, now: now) }
        }
        condition.broadcast()
    }

    /// Health turns to failing: logged once when publishing starts failing, not once per retry; the reason shown by
    /// `status` and `spool stats` follows the latest failure.
    private func fail(_ reason: String, now: Date) {
        if case .paused = health, pauseEnd > MonotonicClock.now() { return }
        if case .failing(let old, let since) = health {
            guard old != reason else { return }
            health = .failing(reason: reason, since: since)
        } else {
            health = .failing(reason: reason, since: now)
            note(
                .warn, "mqtt: cannot publish: scans stay queued and are published when the broker is back",
                [("reason", reason), ("broker", settings.endpoint)])
        }
        try? spool.recordSinkError(MQTTSink.sinkName, reason, now: now)
    }

    private func note(_ level: LogLevel, _ message: String, _ fields: [(String, String)]) {
        let key = message + fields.map { $0.1 }.joined()
        guard key != lastLog else { return }
        lastLog = key
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
            condition.lock()
            if stopping {
                condition.unlock()
                break
            }
            let now = Date()
            var until: Double
            if case .paused = health, pauseEnd > MonotonicClock.now() {
                until = pauseEnd
            } else {
                // A more specific reason (CONNACK, a TLS error from the log) may already be known: keep it.
                if !connected, case .failing = health {
                } else if !connected {
                    fail(MQTTClient.describe(rc), now: now)
                }
                let delay = min(MQTTSink.maxReconnectDelay, Double(1 << min(connectFailures, 5)))
                until = MonotonicClock.deadline(after: delay * Double.random(in: 0.75...1.0))
            }
            connectFailures += 1
            while !stopping, condition.wait(until: until) {}
            let stop = stopping
            condition.unlock()
            if stop { break }
            rc = client.reconnect()
        }
        condition.withLock {
            connected = false
            networkRunning = false
            condition.broadcast()
        }
    }

    // MARK: publisher thread

    private func publisherLoop(_ client: MQTTClient) {
        var lastDataVersion = (try? spool.dataVersion()) ?? 0
        // Never more than the window handed to libmosquitto: what it would queue beyond it could be resent after a
        // reconnect ahead of older scans republished from the spool, breaking capture order.
        let outstanding = settings.maxInflight
        // Acknowledged scans not yet recorded: written once the window is refilled, in batches.
        var toRecord: [Int] = []
        condition.lock()
        while !stopping {
            let now = Date()
            let clock = MonotonicClock.now()
            if !acks.isEmpty {
                var delivered: [Int] = []
                var refusal: Int32?
                for (mid, code) in acks {
                    // Not ours: the status message, or a message of an earlier connection.
                    guard let seq = inFlight.removeValue(forKey: mid) else { continue }
                    if code < 0x80 { delivered.append(seq) } else { refusal = code }
                }
                acks.removeAll()
                stats.acknowledged += delivered.count
                if let refusal {
                    let reason = "the broker refused a message: \(MQTTClient.reason(refusal))"
                    health = .paused(reason: reason, until: now.addingTimeInterval(MQTTSink.refusalPause))
                    pauseEnd = MonotonicClock.deadline(after: MQTTSink.refusalPause)
                    note(
                        .error,
                        "mqtt: publishing paused: \(reason); check the broker's ACL for \(settings.topicBase)/# "
                            + "and send SIGHUP (retrying in 5 min)", [])
                    try? spool.recordSinkError(MQTTSink.sinkName, reason, now: now)
                    // After the pause, start again from the oldest unacknowledged scan.
                    inFlight.removeAll()
                    buffer.removeAll()
                    cursor = 0
                }
                toRecord += delivered
                continue
            }
            // Refill the window first (below), then record; a batch is written at the latest when nothing is left
            // to publish or 256 have gathered.
            let pausedNow: Bool = {
                if case .paused = health { return pauseEnd > clock }
                return false
            }()
            let canPublish =
                connected && !pausedNow && inFlight.count < outstanding && (wakeRequested || !buffer.isEmpty)
            if !toRecord.isEmpty, !canPublish || toRecord.count >= 256 {
                let seqs = toRecord
                toRecord.removeAll()
                condition.unlock()
                do {
                    try spool.markSinkDelivered(MQTTSink.sinkName, seqs: seqs, now: now)
                } catch {
                    logger.error("mqtt: cannot record acknowledged scans", [("error", error.description)])
                }
                condition.lock()
                continue
            }
            let paused: Bool = {
                if case .paused = health { return pauseEnd > clock }
                return false
            }()
            if connected, !paused, clock >= statusDue {
                statusDue = clock + 5
                condition.unlock()
                let text = statusPayload(online: true)
                condition.lock()
                if text != publishedStatus {
                    publishedStatus = text
                    condition.unlock()
                    _ = client.publish(topic: settings.statusTopic, payload: Array(text.utf8), retain: true)
                    condition.lock()
                }
                continue
            }
            if connected, !paused, inFlight.count < outstanding, wakeRequested || !buffer.isEmpty {
                let generation = self.generation
                if buffer.isEmpty {
                    wakeRequested = false
                    let after = cursor
                    condition.unlock()
                    var page: [SinkItem] = []
                    do {
                        page = try spool.pendingForSink(MQTTSink.sinkName, afterSeq: after, limit: 500)
                    } catch {
                        // Disk trouble: the periodic wake-up below tries again.
                        logger.error("mqtt: cannot read the spool", [("error", error.description)])
                    }
                    condition.lock()
                    guard generation == self.generation else { continue }
                    buffer = page
                    if page.count == 500 { wakeRequested = true }
                    if page.isEmpty { continue }
                }
                let batch = Array(buffer.prefix(outstanding - inFlight.count))
                buffer.removeFirst(batch.count)
                cursor = batch.last?.seq ?? cursor
                condition.unlock()
                var published: [(Int32, Int)] = []
                for item in batch {
                    let payload = Array(item.record.json().encoded().utf8)
                    let (rc, mid) = client.publish(topic: settings.topic(for: item.record), payload: payload)
                    if MQTTClient.isSuccess(rc) {
                        published.append((mid, item.seq))
                    } else if MQTTClient.isOversize(rc) {
                        let reason = "scan \(item.record.id) is larger than the broker accepts (\(payload.count) bytes)"
                        logger.error("mqtt: scan not publishable; kept in the spool as refused", [("reason", reason)])
                        try? spool.markSinkRefused(MQTTSink.sinkName, seq: item.seq, reason: reason, now: now)
                    } else {
                        break  // the connection went; the next one starts again from the oldest unacknowledged
                    }
                }
                condition.lock()
                stats.published += published.count
                if generation == self.generation { for (mid, seq) in published { inFlight[mid] = seq } }
                // Acks that arrived before their mids were registered are in `acks`; the loop takes them next.
                statusDue = min(statusDue, clock + 1)
                continue
            }
            var until = clock + 2
            if connected, !paused { until = min(until, max(statusDue, clock + 0.05)) }
            if paused { until = min(until, pauseEnd) }
            let timedOut = !condition.wait(until: until)
            if stopping { break }
            if timedOut, !wakeRequested {
                if case .paused = health, pauseEnd <= MonotonicClock.now() {
                    health = connected ? .connected : .connecting
                    wakeRequested = true
                }
                // Other processes (`scan`, `spool retry`) commit without waking us: notice it.
                condition.unlock()
                let version = (try? spool.dataVersion()) ?? lastDataVersion
                condition.lock()
                if version != lastDataVersion {
                    lastDataVersion = version
                    wakeRequested = true
                }
            }
        }
        let unrecorded = toRecord
        condition.unlock()
        try? spool.markSinkDelivered(MQTTSink.sinkName, seqs: unrecorded, now: Date())
        condition.withLock {
            publisherRunning = false
            condition.broadcast()
        }
    }
}
