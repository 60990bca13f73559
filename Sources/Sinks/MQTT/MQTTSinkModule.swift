import BridgeCore
import Foundation
import Logging
import Platform
import SinkKit
import Spool

extension ScanSinkModule {
    /// An MQTT broker (`mqtt` section): every scan from the spool's `mqtt` queue, and the device's retained status.
    public static let mqtt = ScanSinkModule(
        name: "mqtt", statusKey: "mqtt", configSection: MQTTConfig.self,
        make: { SinkSlot<QueuedSink<MQTTSettings>, MQTTSettings>(.mqtt, context: $0) },
        doctor: { [MQTTDoctor.check($0)] },
        queue: { $0.mqtt.url == nil ? nil : QueuedSinkKind.mqtt.name })
}

extension SinkSlotKind where Running == QueuedSink<MQTTSettings>, Settings == MQTTSettings {
    /// The running MQTT sink, replaceable on SIGHUP: new credentials, URL or topics make a new session; the same
    /// settings again end a reconnect backoff or a pause (the next login goes at once).
    static let mqtt = SinkSlotKind(
        name: "mqtt", queue: QueuedSinkKind.mqtt.name, settings: QueuedSinkKind.mqtt.settings,
        make: { settings, context in
            do {
                try context.spool.registerSink(QueuedSinkKind.mqtt.name)
            } catch {
                // A write at start can fail on a full disk; the queue registered by an earlier start (if any) is
                // still there, and what it holds is published anyway.
                context.logger.error(
                    "mqtt: cannot register its queue; publishing what it holds", [("error", "\(error)")])
            }
            guard
                let sink = QueuedSink(
                    .mqtt, settings: settings, spool: context.spool, logger: context.logger,
                    healthChanged: context.stateChanged, delivered: context.delivered),
                let session = sink.transport as? MQTTTransport
            else { return nil }
            session.setStatus { context.deviceStatus(for: QueuedSinkKind.mqtt.name) }
            sink.start()
            return sink
        },
        reload: { sink, _, new in sink.update(new) },
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
            guard let (sink, settings) = running else { return .null }
            let (state, reason) = sink.currentHealth.mqttState
            let stats = sink.currentStats
            return .object([
                ("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null),
                ("broker", .string(settings.endpoint)), ("topics", .string(settings.topicBase)),
                (
                    "pending",
                    .integer((try? context.spool.sinkStats(named: QueuedSinkKind.mqtt.name))?.pending ?? 0)
                ),
                ("published", .integer(stats.attempts)), ("acknowledged", .integer(stats.delivered)),
                ("refused", .integer(stats.dead)),
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
                Double((try? context.spool.sinkStats(named: QueuedSinkKind.mqtt.name))?.pending ?? 0),
                help: "Scans queued for the MQTT broker")
            let stats = sink.currentStats
            m.addCounter(
                "plings_bridge_mqtt_published_total", stats.attempts,
                help: "Scan messages handed to the broker connection (repeats included)")
            m.addCounter(
                "plings_bridge_mqtt_acknowledged_total", stats.delivered,
                help: "Scan messages the broker acknowledged (PUBACK)")
            m.addCounter(
                "plings_bridge_mqtt_connects_total", (sink.transport as? MQTTTransport)?.connects ?? 0,
                help: "Connections the broker accepted")
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
