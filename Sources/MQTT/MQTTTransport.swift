import BridgeCore
import Foundation
import Logging
import Platform
import Plugins
import Spool

extension QueuedSinkKind<MQTTSettings> {
    /// The MQTT broker as a queue sink: its queue is `mqtt`, its rule of order capture order over every identifier
    /// (a subscriber sees the reads in their order), its requests a window of QoS 1 messages each, answered by the
    /// broker's PUBACKs. Claims, outcomes, health, backoff, stats and pause are the runner's, as for the API and
    /// the webhook; the broker session (one connection, its network thread) and the retained status beside it
    /// are the transport's. New settings make a new sink (a new session); the same settings again end a
    /// reconnect backoff.
    public static let mqtt = QueuedSinkKind(
        name: "mqtt",
        settings: { configuration throws(ConfigError) in try MQTTConfig.settings(configuration.config) },
        describe: { [("broker", $0.endpoint), ("topics", $0.topicBase)] },
        workers: { _ in MQTTTransport.windows },
        backoff: Backoff(base: 1, cap: MQTTTransport.maxReconnectDelay),
        initialHealth: .starting,
        inPlace: { old, new in old == new },
        voice: { current in .mqtt(current) },
        transport: { current, logger in MQTTTransport(settings: current(), logger: logger) })
}

extension QueuedSinkVoice {
    /// The broker sink's lines (an operator's words: publishing, not delivery).
    static func mqtt(_ current: @escaping @Sendable () -> MQTTSettings) -> QueuedSinkVoice {
        var voice = QueuedSinkVoice(
            prefix: "mqtt", deliveredScan: "mqtt: scan acknowledged",
            failing: {
                (
                    "mqtt: cannot publish: scans stay queued and are published when the broker is back",
                    [("reason", $0), ("broker", current().endpoint)]
                )
            },
            resumed: { _, _, _ in ("mqtt: connected; publishing", [("broker", current().endpoint)]) },
            paused: {
                (
                    "mqtt: publishing paused: \($0.reason ?? ""); check the broker's ACL for \(current().topicBase)/# "
                        + "and send SIGHUP (retrying in 5 min)", []
                )
            },
            refusedScan: { _, reason in
                ("mqtt: scan not publishable; kept in the spool as refused", [("reason", reason)])
            },
            refusedBatches: { ("mqtt: messages refused", [("reason", $0)]) })
        voice.reloaded = "mqtt: configuration reloaded; connecting again now"
        return voice
    }
}

/// The broker session of the `mqtt` sink: one libmosquitto client per connection, its network thread, and the
/// retained status message beside the scans (see `MQTTTransport+Session.swift` and `+Status.swift`).
///
/// A request is a window of scans in capture order: `handOver` hands them to libmosquitto as the runner's worker
/// takes the request (under the runner's lock, so requests go in claim order however many workers there are),
/// and `deliver` waits for their PUBACKs. libmosquitto puts at most `maxInflight` on the wire and sends the next
/// as each PUBACK comes; with `windows` requests in flight the wire stays full while a worker records its answers.
///
/// Capture order across a lost connection: libmosquitto would resend the messages it still holds after the next
/// CONNACK, while the runner sends the same scans again from the spool; so a lost connection ends its client.
/// Every scan not acknowledged then is answered "retry" (the runner records it and claims it again, in capture
/// order, once connected), and the next connection is a new client that holds nothing. Nothing is sent twice by
/// this process except what the broker received but had not acknowledged (at least once; the scan `id` lets
/// consumers drop the repeat).
public final class MQTTTransport: QueuedSinkTransport {
    /// Requests in flight at once (the runner's workers), each of `maxInflight * windowSize` scans.
    static let windows = 2
    /// A request's scans, in `maxInflight`s.
    static let windowSize = 2
    /// How long a refused login or a refused message pauses publishing (SIGHUP restarts the sink at once).
    public static let refusalPause = QueuedSinkRunner.pauseDuration
    /// Reconnect backoff: 1 s doubling to this, with jitter.
    public static let maxReconnectDelay: Double = 30
    /// A connection that lasted this long (seconds) was not a flap: the backoff starts again at 1 s.
    static let stableConnection: Double = 30

    /// One request's messages, from `handOver` to `deliver`'s return.
    struct Request {
        var outcomes: [DeliveryOutcome?]
        var waiting: Int
        /// The connection it was handed to; a later one means that one was lost.
        var connection: Int
    }

    /// Everything the worker threads, the network thread and the status thread share, in one `Monitor`.
    struct State {
        var client: MQTTClient?
        var connected = false
        /// Counts connections: a request handed to an earlier one lost it.
        var connection = 0
        var lostReason = "connection lost"
        var connectedAt = -Double.infinity
        /// Connections in a row that ended sooner than `stableConnection`.
        var shortConnections = 0
        /// The connection that ended had lasted: the next backoff starts again from 1 s.
        var forgiveNext = false
        /// Messages handed to the current client: mid -> (request key, index).
        var messages: [Int32: (key: String, index: Int)] = [:]
        var requests: [String: Request] = [:]
        /// PUBACKs in arrival order (a PUBACK may come before `handOver` registered its mid).
        var acks: [(mid: Int32, code: Int32)] = []
        /// Connection events the network thread tells the runner after `loop` returns (never from a callback).
        var events: [Event] = []
        var connects = 0
        var stopping = false
        /// Shutdown began (`cancel`): the offline status is on its way; when it is acknowledged, so is everything
        /// sent before it, and the waiting requests end.
        var closing = false
        var offlineMid: Int32?
        var offlineAcked = false
        var reconnectNow = false
        var networkRunning = false
        var statusRunning = false
        /// Bumped by every event, wake-up and stop, so a wait sees that something changed.
        var ticks = 0
        // The retained status and Home Assistant's discovery (`+Status.swift`).
        var publishedStatus: String?
        var publishedDiscovery: [String: String] = [:]
        var statusDue = -Double.infinity
        var statusLooked = -Double.infinity
    }

    /// What a connection event means for the sink's health, told to the runner by the network thread.
    enum Event {
        case connected
        /// `replacing`: false for a bare result code, which says less than a reason already known.
        case failed(String, replacing: Bool = true)
        case paused(String)
    }

    let settings: MQTTSettings
    let logger: Logger
    let state = Monitor(State())
    /// The network and status threads (`WorkerThread`: joinable, and an end nobody asked for is reported).
    let threads = WorkerThreads()
    let link = Mutex<QueuedSinkLink?>(nil)
    /// The health fields of the retained status message (set by the slot before `start`).
    let status = Mutex<@Sendable () -> JSONValue>({ .object([]) })

    init(settings: MQTTSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    public var batchSize: Int { settings.maxInflight * MQTTTransport.windowSize }
    public var lease: Double { 0 }
    public var order: QueuedSinkOrder { .capture }
    /// Connections the broker accepted, since start.
    public var connects: Int { state.withLock { $0.connects } }

    /// What the retained status message says besides `online`.
    public func setStatus(_ fields: @escaping @Sendable () -> JSONValue) { status.withLock { $0 = fields } }

    public func connect() -> (any QueuedSinkConnection)? { MQTTWindow(transport: self) }

    public func start(_ link: QueuedSinkLink) {
        self.link.withLock { $0 = link }
        state.withLock {
            $0.networkRunning = true
            $0.statusRunning = true
        }
        threads.start(name: "mqtt-network", watched: true) { [self] in networkLoop() }
        threads.start(name: "mqtt-status", watched: true) { [self] in statusLoop() }
    }

    /// A scan was committed, or the device's state changed: look at the status message (at most once a second).
    public func wake() {
        state.update {
            $0.statusDue = min($0.statusDue, $0.statusLooked + 1)
            $0.ticks += 1
        }
    }

    /// A reload with unchanged settings while the broker cannot be reached: the next connection attempt goes now.
    public func resume() {
        state.update {
            $0.reconnectNow = true
            $0.ticks += 1
        }
    }

    /// Publishes `online: false` (retained) unless done already, waits for its PUBACK (everything sent before it
    /// is then acknowledged too) and disconnects cleanly, all by the monotonic `deadline`.
    public func stop(deadline: Double) {
        threads.expectEnd()
        state.update {
            $0.stopping = true
            $0.ticks += 1
        }
        state.wait(until: deadline) { !$0.statusRunning }
        sendOffline()
        state.wait(until: deadline) { $0.offlineAcked || !$0.connected }
        let client = state.withLock { $0.client }
        client?.disconnect()
        state.wait(until: deadline) { !$0.networkRunning }
        threads.join(until: deadline)
        // A network thread still blocked in a connect keeps its client alive (it holds a reference).
        state.withLock { $0.client = nil }
    }

    /// Shutdown with requests waiting: the offline status goes now, behind every message in flight; each waiting
    /// request ends when it is acknowledged (or the connection is gone), with what was acknowledged before it.
    func beginClosing() {
        let first = state.update { s -> Bool in
            defer { s.closing = true }
            return !s.closing
        }
        if first { sendOffline() }
    }

    /// Publishes the retained offline status once, while connected.
    func sendOffline() {
        let (client, send) = state.withLock { s in (s.client, s.connected && s.offlineMid == nil && !s.offlineAcked) }
        guard send, let client else { return }
        let (rc, mid) = client.publish(
            topic: settings.statusTopic, payload: Array(statusPayload(online: false).utf8), retain: true)
        state.update { s in
            if MQTTClient.isSuccess(rc) { s.offlineMid = mid } else { s.offlineAcked = true }
        }
    }

    /// The retained status payload; the last will is the same with `online: false`.
    func statusPayload(online: Bool) -> String {
        var members: [(String, JSONValue)] = [("online", .bool(online)), ("deviceId", .string(settings.deviceID))]
        if case .object(let fields) = status.withLock({ $0 })() { members += fields }
        if !online { members.append(("at", .string(Timestamp.format(Date())))) }
        return JSONValue.object(members).encoded()
    }

    // MARK: requests (the runner's workers)

    /// Hands a request's scans to the current client (under the runner's lock: claim order). Without a connection
    /// nothing is handed over and the request is answered "retry" at once.
    ///
    /// The messages are published under the state's lock, so each one's id is known before its PUBACK can be
    /// matched (libmosquitto's network thread only appends the PUBACK there, in a callback that holds none of the
    /// locks `mosquitto_publish` takes).
    func handOver(_ batch: DeliveryBatch) {
        state.update { s in handOver(batch, &s) }
    }

    private func handOver(_ batch: DeliveryBatch, _ s: inout State) {
        var request = Request(
            outcomes: Array(repeating: nil, count: batch.records.count), waiting: batch.records.count,
            connection: s.connection)
        defer { s.requests[batch.key] = request }
        guard s.connected, !s.closing, let client = s.client else {
            request.connection = -1
            return
        }
        var answered: [(Int, DeliveryOutcome)] = []
        for (index, record) in batch.records.enumerated() {
            // The read, not its delivery state: a repeat after a lost connection carries the same bytes.
            let payload = Array(record.readJSON().encoded().utf8)
            let (rc, mid) = client.publish(topic: settings.topic(for: record), payload: payload)
            if MQTTClient.isSuccess(rc) {
                s.messages[mid] = (batch.key, index)
            } else if MQTTClient.isOversize(rc) {
                let reason = "scan \(record.id) is larger than the broker accepts (\(payload.count) bytes)"
                answered.append((index, .dead(reason: reason, response: "")))
            } else if MQTTClient.isQueuedWithoutConnection(rc) {
                // The connection went meanwhile: this client is dropped, so the message would never go.
                answered.append((index, .retry(reason: "not connected to the broker", retryAfter: nil)))
            } else {
                // Not taken (e.g. the broker allows no QoS 1): sending again at once would spin.
                answered.append(
                    (index, .authPaused(reason: "libmosquitto did not take a message: \(MQTTClient.describe(rc))")))
            }
        }
        for (index, outcome) in answered {
            request.outcomes[index] = outcome
            request.waiting -= 1
        }
    }

    /// Waits for the PUBACKs of a request handed over: one outcome per scan, `retry` for those the lost
    /// connection left unanswered, nil for those not acknowledged when shutdown ended the wait.
    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? {
        var outcomes: [DeliveryOutcome?] = []
        state.wait { s in
            takeAcks(&s)
            guard let request = s.requests[batch.key] else { return true }
            let lost = request.connection != s.connection
            let closed = s.closing && (s.offlineAcked || !s.connected)
            guard request.waiting == 0 || lost || closed else { return false }
            outcomes = request.outcomes
            if lost {
                let reason = request.connection < 0 ? "not connected to the broker" : s.lostReason
                outcomes = outcomes.map { $0 ?? .retry(reason: reason, retryAfter: nil) }
            }
            s.requests[batch.key] = nil
            s.messages = s.messages.filter { $0.value.key != batch.key }
            return true
        }
        guard !outcomes.isEmpty else { return nil }
        return .each(outcomes)
    }

    /// Matches the PUBACKs that arrived to the requests' messages (the status messages' are not ours).
    func takeAcks(_ s: inout State) {
        guard !s.acks.isEmpty else { return }
        for (mid, code) in s.acks {
            guard let (key, index) = s.messages.removeValue(forKey: mid), var request = s.requests[key],
                request.outcomes[index] == nil
            else { continue }
            request.outcomes[index] =
                code < 0x80
                ? .delivered(response: "")
                : .authPaused(reason: "the broker refused a message: \(MQTTClient.reason(code))")
            request.waiting -= 1
            s.requests[key] = request
        }
        s.acks.removeAll()
    }
}

/// One worker's view of the broker session: requests are the transport's, in one map.
struct MQTTWindow: QueuedSinkConnection {
    let transport: MQTTTransport

    func handOver(_ batch: DeliveryBatch) { transport.handOver(batch) }
    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? { transport.deliver(batch) }
    func cancel() { transport.beginClosing() }
}
