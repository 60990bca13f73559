import BridgeCore
import Foundation
import Platform

/// The broker connection: libmosquitto's network thread and the events it reports (CONNACK, disconnect, PUBACK,
/// log), which move the sink's health (`SinkHealth`) and the reconnect backoff.
extension MQTTSink {
    // MARK: events (network thread)

    func handle(_ event: MQTTEvent) {
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
    func connectionLost(_ s: inout State, code: Int32, now: Date) {
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
    func fail(_ s: inout State, _ reason: String, now: Date) {
        let clock = MonotonicClock.now()
        if s.paused(at: clock) || s.health.reason == reason { return }
        if s.health.noteFailure(reason: reason, now: now, clock: clock, keepFirstReason: false) != nil {
            note(
                &s, .warn, "mqtt: cannot publish: scans stay queued and are published when the broker is back",
                [("reason", reason), ("broker", settings.endpoint)])
        }
        s.healthToRecord = (reason, now)
    }

    // MARK: network thread

    func networkLoop(_ client: MQTTClient) {
        // Connecting waits on the broker (a TLS handshake has no timeout of its own): the watchdog counts it as a
        // wait, since a restart would not make a silent broker answer.
        var rc = WorkerActivity.waiting {
            client.connect(host: settings.host, port: settings.port, keepalive: settings.keepalive)
        }
        // The loop blocks in pselect until traffic, a publish, or half the keepalive (for PINGREQ); never polls.
        let timeout = Int32(max(1000, min(30_000, settings.keepalive * 500)))
        while true {
            if MQTTClient.isSuccess(rc) {
                // Waiting for traffic, bounded by `timeout`: the watchdog does not count it as work.
                rc = WorkerActivity.waiting { client.loop(timeoutMilliseconds: timeout) }
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
            // A reload with the same settings (`resume`) ends the wait: the operator fixed the broker or the network.
            state.wait(until: until) { $0.stopping || $0.reconnectNow }
            let stopping = state.update { s -> Bool in
                s.reconnectNow = false
                return s.stopping
            }
            if stopping { break }
            rc = WorkerActivity.waiting { client.reconnect() }
        }
        state.update {
            $0.connected = false
            $0.networkRunning = false
            $0.ticks += 1
        }
    }
}
