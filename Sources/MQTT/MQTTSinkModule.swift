import BridgeCore
import Foundation
import Logging
import Platform
import Plugins
import Spool

extension ScanSinkModule {
    /// An MQTT broker (`mqtt` section): every scan from the spool's `mqtt` queue, and the device's retained status.
    public static let mqtt = ScanSinkModule(
        name: "mqtt", statusKey: "mqtt", configSection: MQTTConfig.self,
        make: { SinkSlot<MQTTSink, MQTTSettings>(.mqtt, context: $0) }, doctor: { [MQTTDoctor.check($0)] },
        queue: { $0.mqtt.url == nil ? nil : MQTTSink.sinkName })
}

extension MQTTSink: SlotSink {}

extension SinkSlotKind where Running == MQTTSink, Settings == MQTTSettings {
    /// The running MQTT sink, replaceable on SIGHUP: new credentials, URL or topics make a new client, and so does
    /// a reload while the broker's refusal pauses it (a new client logs in again at once); a reload with the same
    /// settings while the broker cannot be reached ends the reconnect backoff.
    static let mqtt = SinkSlotKind(
        name: "mqtt", queue: MQTTSink.sinkName,
        settings: { configuration throws(ConfigError) in try MQTTConfig.settings(configuration.config) },
        make: { settings, context in
            let sink = MQTTSink(
                spool: context.spool, settings: settings, logger: context.logger,
                status: { context.deviceStatus(for: MQTTSink.sinkName) }, healthChanged: context.stateChanged,
                delivered: context.delivered)
            do {
                try sink.start()
                return sink
            } catch {
                context.logger.error(
                    "mqtt: not publishing (scans stay queued for the broker)", [("error", "\(error)")])
                return nil
            }
        },
        reload: { sink, current, new in
            // Kept when nothing changed (a reconnect backoff ends), unless a refusal paused it.
            if case .paused = sink.currentHealth { return false }
            guard current == new else { return false }
            sink.resume()
            return true
        },
        started: {
            (
                "scans also go to the MQTT broker",
                [("broker", $0.endpoint), ("topics", $0.topicBase + "/{scans,unrecognized,status}")]
            )
        },
        removed: "mqtt: no mqtt.url; scans are no longer queued for the broker",
        // The broker's clean goodbye (retained offline status) gets at most a second of the shared deadline, so a
        // silent broker never takes the API's last requests' time.
        stopWithin: 1,
        status: { running, context in
            // `mqtt`: the sink's health from the running sink and its queue from the spool; null when not
            // configured.
            guard let sink = running?.sink else { return .null }
            let (state, reason) = sink.currentHealth.mqttState
            let stats = sink.currentStats
            return .object([
                ("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null),
                ("broker", .string(sink.settings.endpoint)), ("topics", .string(sink.settings.topicBase)),
                ("pending", .integer((try? context.spool.sinkStats(named: MQTTSink.sinkName))?.pending ?? 0)),
                ("published", .integer(stats.published)), ("acknowledged", .integer(stats.acknowledged)),
            ])
        },
        metrics: { sink, _, context, m in
            // The broker sink's state (one series per state, 1 for the current one), queue and counters.
            m.addState(
                "plings_bridge_mqtt_state", states: ["connecting", "publishing", "failing", "paused"],
                current: sink.currentHealth.mqttState.state,
                help: "1 for the MQTT sink's current state (as `status` shows it)")
            m.add(
                "plings_bridge_mqtt_pending",
                Double((try? context.spool.sinkStats(named: MQTTSink.sinkName))?.pending ?? 0),
                help: "Scans queued for the MQTT broker")
            let stats = sink.currentStats
            m.addCounter(
                "plings_bridge_mqtt_published_total", stats.published,
                help: "Scan messages handed to the broker connection (repeats included)")
            m.addCounter(
                "plings_bridge_mqtt_acknowledged_total", stats.acknowledged,
                help: "Scan messages the broker acknowledged (PUBACK)")
            m.addCounter(
                "plings_bridge_mqtt_connects_total", stats.connects, help: "Connections the broker accepted")
        })
}

extension SinkHealth.State {
    /// The state `status` shows for the broker sink, and its reason.
    var mqttState: (state: String, reason: String?) {
        switch self {
        case .starting: return ("connecting", nil)
        case .healthy: return ("publishing", nil)
        default: return described
        }
    }
}
