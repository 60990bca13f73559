import BridgeCore
import Foundation
import Platform

/// The device's retained status message and Home Assistant's discovery, beside the scans: published on each
/// connection and whenever the status changed, looked at after a wake-up (a commit, a change of a source or a
/// sink) at most once a second; never on a timer.
extension MQTTTransport {
    func statusLoop() {
        while true {
            let (due, stop) = state.update { s -> (Bool, Bool) in
                if s.stopping { return (false, true) }
                let clock = MonotonicClock.now()
                guard s.connected, s.statusDue <= clock else { return (false, false) }
                s.statusLooked = clock
                s.statusDue = .infinity
                return (true, false)
            }
            if stop { break }
            if due, let client = state.withLock({ $0.client }) {
                let text = statusPayload(online: true)
                let changed = state.withLock { s in
                    defer { s.publishedStatus = text }
                    return s.publishedStatus != text
                }
                if changed { _ = client.publish(topic: settings.statusTopic, payload: Array(text.utf8), retain: true) }
                publishDiscovery(client)
                continue
            }
            let ticks = statusTicks.withLock { $0 }
            let (until, stopping) = state.withLock { s in
                (s.connected && s.statusDue.isFinite ? s.statusDue : Double.infinity, s.stopping)
            }
            if stopping { break }
            statusTicks.wait(until: until) { $0 != ticks }
        }
        state.update {
            $0.statusRunning = false
        }
    }

    /// Home Assistant's discovery messages (`mqtt.homeAssistant`), for the sources the status names: each one that
    /// changed since this connection began, and an empty retained message for one no longer wanted (a source gone).
    func publishDiscovery(_ client: MQTTClient) {
        guard let prefix = settings.homeAssistantPrefix else { return }
        var sources: [String] = []
        if case .object(let members)? = status.withLock({ $0 })()["sources"] { sources = members.map(\.0) }
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
}
