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
        make: { context in
            MQTTSinkSlot(
                spool: context.spool, config: context.configuration.config, logger: context.logger,
                status: { context.deviceStatus(for: MQTTSink.sinkName) }, healthChanged: context.stateChanged,
                delivered: context.delivered)
        },
        doctor: { [MQTTDoctor.check($0)] },
        queue: { $0.mqtt.url == nil ? nil : MQTTSink.sinkName })
}

/// The running MQTT sink, if any, replaceable on SIGHUP (new credentials, URL or topics: a new client).
final class MQTTSinkSlot: ScanSink {
    let name = "mqtt"
    private let sink = Mutex<MQTTSink?>(nil)
    private let spool: Spool
    private let logger: Logger
    private let initial: BridgeConfig
    private let running = Mutex(false)
    /// The device's status fields of the retained `<base>/status` message besides `online`.
    private let status: @Sendable () -> JSONValue
    private let healthChanged: @Sendable () -> Void
    private let delivered: @Sendable () -> Void

    /// Nothing starts before `start()`.
    init(
        spool: Spool, config: BridgeConfig, logger: Logger, status: @escaping @Sendable () -> JSONValue,
        healthChanged: @escaping @Sendable () -> Void = {}, delivered: @escaping @Sendable () -> Void = {}
    ) {
        self.healthChanged = healthChanged
        self.delivered = delivered
        self.spool = spool
        self.logger = logger
        self.status = status
        initial = config
    }

    func start() {
        running.withLock { $0 = true }
        apply(initial)
    }

    /// The broker's clean goodbye (retained offline status) gets at most a second of the shared deadline, so a
    /// silent broker never takes the API's last requests' time.
    func stop(deadline: Double) {
        running.withLock { $0 = false }
        let stopping = sink.withLock { slot -> MQTTSink? in
            defer { slot = nil }
            return slot
        }
        stopping?.stop(deadline: min(deadline, MonotonicClock.deadline(after: 1)))
    }

    var current: MQTTSink? { sink.withLock { $0 } }

    func wake() { current?.wake() }

    func apply(_ configuration: SinkConfiguration) { apply(configuration.config) }

    /// Starts (or, when the settings changed or the broker refused us, restarts) the sink for `config`; with no
    /// `mqtt.url`, stops it and stops queueing scans for it (what is queued stays for when it returns).
    private func apply(_ config: BridgeConfig) {
        guard running.withLock({ $0 }) else { return }
        let settings: MQTTSettings?
        do {
            settings = try MQTTConfig.settings(config)
        } catch {
            logger.error("mqtt: not publishing: \(error.description)")
            return
        }
        let running = current
        if let running, let settings, running.settings == settings {
            guard case .paused = running.currentHealth else { return }
        }
        running?.stop(timeout: 2)
        sink.withLock { $0 = nil }
        guard let settings else {
            if (try? spool.sinkNames())?.contains(MQTTSink.sinkName) == true {
                try? spool.disableSink(MQTTSink.sinkName)
                if running != nil || config.mqtt.url == nil {
                    logger.info("mqtt: no mqtt.url; scans are no longer queued for the broker")
                }
            }
            return
        }
        let fresh = MQTTSink(
            spool: spool, settings: settings, logger: logger, status: status, healthChanged: healthChanged,
            delivered: delivered)
        do {
            try fresh.start()
            sink.withLock { $0 = fresh }
            logger.info(
                "scans also go to the MQTT broker",
                [("broker", settings.endpoint), ("topics", settings.topicBase + "/{scans,unrecognized,status}")])
        } catch {
            logger.error(
                "mqtt: not publishing (scans stay queued for the broker)", [("error", "\(error)")])
        }
    }

    /// `mqtt`: the sink's health from the running sink and its queue from the spool; null when not configured.
    var statusEntry: JSONValue {
        guard let sink = current else { return .null }
        let (state, reason) = MQTTSinkSlot.describe(sink.currentHealth)
        let stats = sink.currentStats
        return .object([
            ("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null),
            ("broker", .string(sink.settings.endpoint)), ("topics", .string(sink.settings.topicBase)),
            ("pending", .integer(queued)), ("published", .integer(stats.published)),
            ("acknowledged", .integer(stats.acknowledged)),
        ])
    }

    /// The broker sink's state (one series per state, 1 for the current one), queue and counters.
    func addMetrics(to m: inout MetricsText) {
        guard let sink = current else { return }
        let (currentState, _) = MQTTSinkSlot.describe(sink.currentHealth)
        for state in ["connecting", "publishing", "failing", "paused"] {
            m.add(
                "plings_bridge_mqtt_state", state == currentState ? 1 : 0, labels: [("state", state)],
                help: "1 for the MQTT sink's current state (as `status` shows it)")
        }
        m.add("plings_bridge_mqtt_pending", Double(queued), help: "Scans queued for the MQTT broker")
        let stats = sink.currentStats
        m.add(
            "plings_bridge_mqtt_published_total", Double(stats.published),
            help: "Scan messages handed to the broker connection (repeats included)", type: "counter")
        m.add(
            "plings_bridge_mqtt_acknowledged_total", Double(stats.acknowledged),
            help: "Scan messages the broker acknowledged (PUBACK)", type: "counter")
        m.add(
            "plings_bridge_mqtt_connects_total", Double(stats.connects), help: "Connections the broker accepted",
            type: "counter")
    }

    /// Scans waiting in the spool's `mqtt` queue (a counter row, not a count of the queue).
    private var queued: Int { (try? spool.sinkStats())?.first { $0.name == MQTTSink.sinkName }?.pending ?? 0 }

    /// The state `status` shows for `health`, and its reason.
    static func describe(_ health: SinkHealth.State) -> (state: String, reason: String?) {
        switch health {
        case .starting: return ("connecting", nil)
        case .healthy: return ("publishing", nil)
        case .failing(let reason, _): return ("failing", reason)
        case .paused(let reason, _): return ("paused", reason)
        }
    }
}
