import BridgeCore
import Foundation
import Logging
import Platform
import SinkKit
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
/// A request is a run of scans in capture order: `handOver` takes them (the runner calls it in claim order however
/// many workers there are), `feed` hands them to libmosquitto a few windows at a time, and `deliver` waits for their
/// PUBACKs. libmosquitto puts at most `maxInflight` on the wire and sends the next as each PUBACK comes; with
/// `windows` requests in flight the wire stays full while a worker records its answers.
///
/// Capture order across a lost connection: libmosquitto would resend the messages it still holds after the next
/// CONNACK, while the runner sends the same scans again from the spool; so a lost connection ends its client.
/// Every scan not acknowledged then is answered "retry" (the runner records it and claims it again, in capture
/// order, once connected), and the next connection is a new client that holds nothing. Nothing is sent twice by
/// this process except what the broker received but had not acknowledged (at least once; the scan `id` lets
/// consumers drop the repeat).
public final class MQTTTransport: QueuedSinkTransport {
    /// Requests in flight at once (the runner's workers): while one worker records its request's answers (one
    /// spool transaction) the other two keep the wire full (measured: with two, the wire went idle whenever a
    /// record took longer than a request's PUBACKs; `plings-bench mqtt`).
    static let windows = 3
    /// A request's scans, in `maxInflight`s: each request's answers are one spool transaction, whose cost is
    /// mostly per transaction (the index pages it touches), so requests are large (measured: 40 scans a request
    /// drained 100,000 in 10 s, 500 in 4.6 s, 1,000 in 4.4-4.9 s; `plings-bench mqtt`). libmosquitto still holds
    /// only `heldWindows` of them at once.
    static let windowSize = 50
    /// Messages libmosquitto holds at once, in `maxInflight`s (see `feed`).
    static let heldWindows = 4
    /// Reconnect backoff: 1 s doubling to this, with jitter.
    public static let maxReconnectDelay: Double = 30
    /// A connection that lasted this long (seconds) was not a flap: the backoff starts again at 1 s.
    static let stableConnection: Double = 30

    /// One scan's message, made by `handOver`, waiting for `feed` to hand it to libmosquitto.
    struct Outgoing {
        var key: String
        var index: Int
        var id: String
        var topic: String
        var payload: [UInt8]
    }

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
        /// Messages handed to the current client and not yet acknowledged: mid -> (request key, index).
        var messages: [Int32: (key: String, index: Int)] = [:]
        /// Messages of the requests taken, not yet handed to libmosquitto (`feed`), in claim order.
        var outgoing = OutgoingQueue()
        var requests: [String: Request] = [:]
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
    /// What the status thread waits on, apart from `state`, whose every PUBACK-completed request would wake it:
    /// bumped by a wake-up, a connection event and the stop.
    let statusTicks = Monitor(0)
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
    /// Messages libmosquitto holds at once (`feed`).
    var heldMessages: Int { settings.maxInflight * MQTTTransport.heldWindows }
    /// What libmosquitto holds at once: the wire is full from the first message while the next request is read.
    public var openingBatchSize: Int { heldMessages }
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
        // Only the status thread cares, and it waits on `statusTicks`: no need to wake the workers on `state`.
        state.withLock { $0.statusDue = min($0.statusDue, $0.statusLooked + 1) }
        statusTicks.update { $0 += 1 }
    }

    /// A reload with unchanged settings while the broker cannot be reached: the next connection attempt goes now.
    public func resume() {
        state.update {
            $0.reconnectNow = true
        }
    }

    /// Publishes `online: false` (retained) unless done already, waits for its PUBACK (everything sent before it
    /// is then acknowledged too) and disconnects cleanly, all by the monotonic `deadline`.
    public func stop(deadline: Double) {
        threads.expectEnd()
        state.update {
            $0.stopping = true
        }
        statusTicks.update { $0 += 1 }
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
            defer {
                s.closing = true
                // Not handed to libmosquitto: they stay queued in the spool (their outcomes stay nil).
                s.outgoing.removeAll()
            }
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

    /// Takes a request's scans (the runner calls it in claim order) into the queue `feed` hands to libmosquitto.
    /// Without a connection nothing is taken and the request is answered "retry" at once; once closing, it is
    /// answered at once with no outcome. The payloads are made here, outside every lock.
    func handOver(_ batch: DeliveryBatch) {
        // The read, not its delivery state: a repeat after a lost connection carries the same bytes.
        let messages = zip(batch.records.indices, batch.records).map { index, record in
            Outgoing(
                key: batch.key, index: index, id: record.id, topic: settings.topic(for: record),
                payload: Array(record.readJSON().encoded().utf8))
        }
        state.update { s in
            var request = Request(
                outcomes: Array(repeating: nil, count: batch.records.count), waiting: batch.records.count,
                connection: s.connection)
            if s.closing {
                // Stopping: nothing more goes out, and the scans stay queued as they were (no outcome, no attempt).
                request.waiting = 0
            } else if s.connected {
                s.outgoing.append(contentsOf: messages)
            } else {
                request.connection = -1
            }
            s.requests[batch.key] = request
            feed(&s)
        }
    }

    /// Hands libmosquitto the next queued messages while it holds fewer than `heldMessages`: called after a request
    /// was taken and, on the network thread, after each PUBACK (publishing from libmosquitto's callback is
    /// allowed; it holds none of the locks `mosquitto_publish` takes). Each message's id is registered under the
    /// state's lock before its PUBACK can be matched.
    ///
    /// libmosquitto puts at most `maxInflight` on the wire and sends the next message it holds as each PUBACK
    /// comes, from its own thread; holding a few windows keeps the wire full without waiting for this hand-over.
    /// Holding no more keeps the offline status, sent at a clean stop behind what libmosquitto holds, quick to be
    /// acknowledged; the rest of a request waits here, where a stop drops it (its scans stay queued).
    /// Returns whether a message libmosquitto would not take answered a request's last scan (its worker may go on).
    @discardableResult
    func feed(_ s: inout State) -> Bool {
        guard s.connected, !s.closing, let client = s.client else { return false }
        var completed = false
        while s.messages.count < heldMessages, let message = s.outgoing.popFirst() {
            let (rc, mid) = client.publish(topic: message.topic, payload: message.payload)
            let outcome: DeliveryOutcome
            if MQTTClient.isSuccess(rc) {
                s.messages[mid] = (message.key, message.index)
                continue
            } else if MQTTClient.isOversize(rc) {
                let reason = "scan \(message.id) is larger than the broker accepts (\(message.payload.count) bytes)"
                outcome = .dead(reason: reason, response: "")
            } else if MQTTClient.isQueuedWithoutConnection(rc) {
                // The connection went meanwhile: this client is dropped, so the message would never go.
                outcome = .retry(reason: "not connected to the broker", retryAfter: nil)
            } else {
                // Not taken (e.g. the broker allows no QoS 1): sending again at once would spin.
                outcome = .authPaused(reason: "libmosquitto did not take a message: \(MQTTClient.describe(rc))")
            }
            s.requests[message.key]?.outcomes[message.index] = outcome
            s.requests[message.key]?.waiting -= 1
            if s.requests[message.key]?.waiting == 0 { completed = true }
        }
        return completed
    }

    /// Waits for the PUBACKs of a request handed over: one outcome per scan, `retry` for those the lost
    /// connection left unanswered, nil for those not acknowledged when shutdown ended the wait.
    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? {
        var outcomes: [DeliveryOutcome?] = []
        state.wait { s in
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

    /// Records one PUBACK on its request, in place (the status messages' are not ours), and tops libmosquitto up.
    /// True when that answered a request's last message: its worker may go on.
    func takeAck(_ s: inout State, mid: Int32, code: Int32) -> Bool {
        guard let (key, index) = s.messages.removeValue(forKey: mid), s.requests[key]?.outcomes[index] == nil
        else { return false }
        s.requests[key]?.outcomes[index] =
            code < 0x80
            ? .delivered(response: "")
            : .authPaused(reason: "the broker refused a message: \(MQTTClient.reason(code))")
        s.requests[key]?.waiting -= 1
        let done = s.requests[key]?.waiting == 0
        // A message the top-up could not hand over may complete another request.
        return feed(&s) || done
    }
}

/// The messages waiting for `feed`, first in first out: an array read from a moving head, compacted once the
/// head has passed half of it (no per-message move of the rest).
struct OutgoingQueue {
    private var items: [MQTTTransport.Outgoing] = []
    private var head = 0

    mutating func append(contentsOf more: [MQTTTransport.Outgoing]) { items.append(contentsOf: more) }

    mutating func popFirst() -> MQTTTransport.Outgoing? {
        guard head < items.count else { return nil }
        defer {
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 1024, head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
        }
        return items[head]
    }

    mutating func removeAll() {
        items.removeAll()
        head = 0
    }
}

/// One worker's view of the broker session: requests are the transport's, in one map.
struct MQTTWindow: QueuedSinkConnection {
    let transport: MQTTTransport

    func handOver(_ batch: DeliveryBatch) { transport.handOver(batch) }
    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? { transport.deliver(batch) }
    /// Closing is already graceful (what libmosquitto holds is still acknowledged): it begins at the stop.
    func finish() { transport.beginClosing() }
    func cancel() { transport.beginClosing() }
}
