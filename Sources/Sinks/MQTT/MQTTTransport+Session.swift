import BridgeCore
import Foundation
import Platform

/// The broker session: the network thread runs one libmosquitto client per connection (blocking in pselect on the
/// socket, sending held messages as PUBACKs free the `maxInflight` window), folds its callbacks into the state,
/// and tells the runner (through the `QueuedSinkLink`) when the connection came or went, after `loop` returns.
extension MQTTTransport {
    // MARK: events (libmosquitto's callbacks, on the network thread inside `loop`)

    func handle(_ event: MQTTEvent) {
        // A PUBACK, the common event, wakes the waiting threads only when it completes a request or is the offline
        // status's: every other one is recorded without waking anyone (a drain is thousands a second).
        if case .puback(let mid, let code) = event {
            let wake = state.withLock { s in
                if mid == s.offlineMid {
                    s.offlineAcked = true
                    return true
                }
                return takeAck(&s, mid: mid, code: code)
            }
            if wake { state.update { _ in } }
            return
        }
        state.update { s in
            switch event {
            case .connack(let code):
                if code == 0 {
                    s.connected = true
                    s.connectedAt = MonotonicClock.now()
                    s.connects += 1
                    s.publishedStatus = nil
                    s.publishedDiscovery = [:]
                    s.statusDue = -Double.infinity
                    s.events.append(.connected)
                } else if MQTTClient.isAuthRefusal(code) {
                    s.events.append(.paused("the broker refused the connection: \(MQTTClient.reason(code))"))
                } else {
                    s.events.append(.failed("the broker refused the connection: \(MQTTClient.reason(code))"))
                }
            case .disconnect(let code):
                if s.connected {
                    lose(&s)
                    if code != 0 && !s.stopping { connectionLost(&s, code: code) }
                }
            case .puback:
                break  // above
            case .log(let text):
                // TLS failures are told only here (while connecting); once connected, warnings change nothing.
                if !s.stopping, !s.connected { s.events.append(.failed(text)) }
            }
        }
        // The status thread looks again (a connection means its messages go again).
        statusTicks.update { $0 += 1 }
    }

    /// The connection is gone: the requests handed to it end (`deliver` answers their unacknowledged scans
    /// "retry"), and the next connection is a new client.
    func lose(_ s: inout State) {
        s.connected = false
        s.connection += 1
        s.messages.removeAll()
        s.outgoing.removeAll()
    }

    /// The broker or the network ended a working connection. A broker closes a connection whenever another client
    /// connects with the same client id (Mosquitto 2.0.11 without a word; MQTT v5 brokers may send DISCONNECT 0x8E,
    /// Session taken over): two bridges with one deviceId would take the session from each other every second.
    /// So after three connections in a row that each ended within `stableConnection`, the backoff keeps growing
    /// instead of restarting at 1 s, and the log names the likely cause. One short connection (a broker restart)
    /// changes nothing.
    func connectionLost(_ s: inout State, code: Int32) {
        let lasted = MonotonicClock.now() - s.connectedAt
        s.shortConnections = lasted < MQTTTransport.stableConnection ? s.shortConnections + 1 : 0
        var reason = "connection lost: \(MQTTClient.describeDisconnect(code))"
        if s.shortConnections >= 3 {
            reason +=
                "; \(s.shortConnections) connections in a row ended within \(Int(MQTTTransport.stableConnection)) s: "
                + "is another client connecting as \(settings.clientID)? Give each bridge its own mqtt.deviceId"
        } else {
            s.forgiveNext = true
        }
        s.lostReason = reason
        s.events.append(.failed(reason))
    }

    /// Tells the runner what the connection events meant, outside every lock, and logs the changes it reports.
    func tellRunner() {
        let events = state.update { s -> [Event] in
            defer { s.events.removeAll() }
            return s.events
        }
        guard let link = link.withLock({ $0 }) else { return }
        for event in events {
            switch event {
            case .connected:
                if link.connected() { logger.info("mqtt: connected; publishing", [("broker", settings.endpoint)]) }
            case .failed(let reason, let replacing):
                if link.failed(reason: reason, replacing: replacing) {
                    logger.warn(
                        "mqtt: cannot publish: scans stay queued and are published when the broker is back",
                        [("reason", reason), ("broker", settings.endpoint)])
                }
            case .paused(let reason):
                if link.paused(reason: reason) {
                    logger.error(
                        "mqtt: publishing paused: \(reason); fix mqtt.usernameFile/passwordFile or the broker's ACL "
                            + "and send SIGHUP (retrying in 5 min)", [("broker", settings.endpoint)])
                }
            }
        }
    }

    // MARK: network thread

    /// A new client: it holds nothing from an earlier connection. Nil when it cannot be made (unreadable TLS
    /// files): said once, and tried again after the backoff.
    func newClient() -> MQTTClient? {
        let will = MQTTClient.Will(
            topic: settings.statusTopic,
            payload: JSONValue.object([
                ("online", .bool(false)), ("deviceId", .string(settings.deviceID)),
                ("reason", .string("connection lost")),
            ]).encoded())
        do {
            let client = try MQTTClient(settings: settings, will: will) { [weak self] event in self?.handle(event) }
            state.withLock { $0.client = client }
            return client
        } catch {
            state.update { $0.events.append(.failed(error.description)) }
            return nil
        }
    }

    func networkLoop() {
        // The loop blocks in pselect until traffic, a publish, or half the keepalive (for PINGREQ); never polls.
        let timeout = Int32(max(1000, min(30_000, settings.keepalive * 500)))
        while !state.withLock({ $0.stopping }) {
            if let client = newClient() {
                // Connecting waits on the broker (a TLS handshake has no timeout of its own): the watchdog counts
                // it as a wait, since a restart would not make a silent broker answer.
                var rc = WorkerActivity.waiting {
                    client.connect(host: settings.host, port: settings.port, keepalive: settings.keepalive)
                }
                while MQTTClient.isSuccess(rc) {
                    // Waiting for traffic, bounded by `timeout`: the watchdog does not count it as work.
                    rc = WorkerActivity.waiting { client.loop(timeoutMilliseconds: timeout) }
                    tellRunner()
                }
                // Asked before taking the state's lock: the runner's lock is taken before it (`handOver`), never
                // after it.
                let paused = link.withLock { $0 }?.isPaused ?? false
                let stopping = state.update { s -> Bool in
                    if s.connected { lose(&s) }
                    // A more specific reason (a CONNACK, a TLS error from the log) may already be known: keep it.
                    if !s.stopping, s.events.isEmpty, !paused {
                        s.events.append(.failed(MQTTClient.describe(rc), replacing: false))
                    }
                    return s.stopping
                }
                tellRunner()
                if stopping { break }
            } else {
                tellRunner()
            }
            // 1 s doubling to `maxReconnectDelay`, each wait at least 3/4 of that; a pause's rest while paused.
            let forgiving = state.update { s -> Bool in
                defer { s.forgiveNext = false }
                return s.forgiveNext
            }
            let delay = link.withLock { $0 }?.retryDelay(forgiving: forgiving) ?? 1
            // A reload with the same settings (`resume`) ends the wait: the operator fixed the broker or the network.
            state.wait(until: MonotonicClock.deadline(after: delay)) { $0.stopping || $0.reconnectNow }
            state.update { $0.reconnectNow = false }
        }
        state.update {
            $0.connected = false
            $0.networkRunning = false
        }
        statusTicks.update { $0 += 1 }
    }
}
