import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// Publishes every scan queued for the `mqtt` sink in the spool (QoS 1, capture order) and the device's retained
/// health message, independently of the other sinks (design: the spool is the source of truth; each sink has its
/// own delivery state).
///
/// Two threads, neither on the cooperative pool, each in a file of its own by what it talks to: the broker
/// connection (`MQTTSink+Connection.swift`: the network thread runs libmosquitto, blocking in pselect on the socket,
/// reconnecting with backoff, sending held messages as PUBACKs free the `maxInflight` window; its events), and the
/// publisher (`MQTTSink+Publisher.swift`: reads the spool, hands libmosquitto a few windows of scans, records
/// PUBACKs, keeps the retained status and Home Assistant's discovery current). This file: the lifecycle and the
/// health both threads report.
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

    /// Everything both threads share, in one `Monitor`: one lock, so the connection's events and the publisher's
    /// steps see one consistent state (two types with a lock each would need an order between the locks).
    struct State {
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
        /// A reload ended the reconnect backoff: the network thread connects again at once.
        var reconnectNow = false

        func paused(at clock: Double) -> Bool { health.isPaused && !health.isOpen(at: clock) }
    }

    let state = Monitor(State())
    /// The network and publisher threads (`WorkerThread`: joinable, and an end nobody asked for is reported).
    let workers = WorkerThreads()
    /// Serialises `recordHealth()`'s spool writes (it counts them: a `Mutex<Void>` misleads ThreadSanitizer).
    let healthWrites = Mutex(0)
    let spool: Spool
    public let settings: MQTTSettings
    let logger: Logger
    let status: @Sendable () -> JSONValue
    /// Told after health changed (connected, failing, paused), outside the monitor: `status` follows at once.
    let healthChanged: @Sendable () -> Void
    /// Told after acknowledged scans were recorded in the spool (its counts changed).
    let delivered: @Sendable () -> Void

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

    /// Registers the sink in the spool and starts both threads. A configuration problem (unreadable TLS files) is
    /// thrown: scans are still queued for the sink and published once it is fixed.
    public func start() throws {
        do {
            try spool.registerSink(MQTTSink.sinkName)
        } catch {
            // A write at start can fail on a full disk; when an earlier start registered the sink, scans are
            // queued for it anyway and publishing them needs no write, so a restart mid-episode still publishes.
            let registered = (try? spool.sinkStats(named: MQTTSink.sinkName))?.enabled == true
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
        workers.start(name: "mqtt-network", watched: true) { [self] in networkLoop(client) }
        workers.start(name: "mqtt", watched: true) { [self] in publisherLoop(client) }
    }

    /// A scan was committed, or the device's state changed: publish it now, and look at the status message.
    public func wake() {
        state.update {
            $0.wakeRequested = true
            $0.statusDue = min($0.statusDue, $0.statusLooked + 1)
            $0.ticks += 1
        }
    }

    /// A reload with unchanged settings while the broker cannot be reached: the reconnect backoff (up to
    /// `maxReconnectDelay`) ends and the next connection attempt goes now, as a reload does for every sink.
    public func resume() {
        state.update { s in
            guard s.health.endBackoff(clock: MonotonicClock.now()) else { return }
            // Said before the network thread may connect, under the lock its "connected" line is also written
            // under: logged after the lock, it once came after that line (CI, under ThreadSanitizer).
            logger.info("mqtt: configuration reloaded; connecting again now")
            s.reconnectNow = true
            s.ticks += 1
        }
    }

    /// Stops publishing, publishes `online: false` (retained) and disconnects cleanly, all by the monotonic
    /// `deadline`. Unacknowledged scans stay queued in the spool.
    public func stop(deadline: Double) {
        workers.expectEnd()
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
        try? spool.ledger(MQTTSink.sinkName).recordAcknowledged(seqs: acknowledged, now: now)
        recordHealth()
        client.disconnect()
        state.wait(until: deadline) { !$0.networkRunning }
        workers.join(until: deadline)
        // A network thread still blocked in a connect keeps its client alive (it holds a reference).
        state.withLock { $0.client = nil }
    }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 2) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    /// Pauses publishing for `refusalPause` (a refused message, or one libmosquitto would not take).
    func pause(_ s: inout State, _ reason: String, now: Date) {
        _ = s.health.pause(reason: reason, now: now, clock: MonotonicClock.now())
        note(
            &s, .error,
            "mqtt: publishing paused: \(reason); check the broker's ACL for \(settings.topicBase)/# and send SIGHUP "
                + "(retrying in 5 min)", [])
        s.healthToRecord = (reason, now)
    }

    /// Writes the sink's latest error change, if one was noted, outside the monitor. Taking and writing happen
    /// under `healthWrites`, so two threads cannot write an older change after a newer one.
    func recordHealth() {
        let recorded = healthWrites.withLock { writes -> Bool in
            let noted = state.withLock { s -> (reason: String?, at: Date)? in
                defer { s.healthToRecord = nil }
                return s.healthToRecord
            }
            guard let noted else { return false }
            writes += 1
            try? spool.ledger(MQTTSink.sinkName).recordProblem(noted.reason, now: noted.at)
            return true
        }
        if recorded { healthChanged() }
    }

    func note(_ s: inout State, _ level: LogLevel, _ message: String, _ fields: [(String, String)]) {
        let key = message + fields.map { $0.1 }.joined()
        guard key != s.lastLog else { return }
        s.lastLog = key
        logger.log(level, message, fields)
    }
}
