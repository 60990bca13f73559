import BridgeCore
import Foundation
import Location
import Logging
import MQTT
import Platform
import Spool

/// The running MQTT sink, if any, replaceable on SIGHUP (new credentials, URL or topics: a new client).
public final class MQTTSinkSlot: Service {
    public let name = "mqtt"
    private let sink = Mutex<MQTTSink?>(nil)
    private let spool: Spool
    private let logger: Logger
    private let initial: BridgeConfig
    private let running = Mutex(false)
    /// Set once the pipeline and sources exist (they are built after the slot, which they wake).
    private let statusProvider = Mutex<(@Sendable () -> JSONValue)?>(nil)

    /// Nothing starts before `start()`.
    init(spool: Spool, config: BridgeConfig, logger: Logger) {
        self.spool = spool
        self.logger = logger
        initial = config
    }

    public func start() {
        running.withLock { $0 = true }
        apply(initial)
    }

    /// The broker's clean goodbye (retained offline status) gets at most a second of the shared deadline, so a
    /// silent broker never takes the API's last requests' time.
    public func stop(deadline: Double) {
        running.withLock { $0 = false }
        let stopping = sink.withLock { slot -> MQTTSink? in
            defer { slot = nil }
            return slot
        }
        stopping?.stop(deadline: min(deadline, MonotonicClock.deadline(after: 1)))
    }

    func setStatus(_ provider: @escaping @Sendable () -> JSONValue) { statusProvider.withLock { $0 = provider } }

    var current: MQTTSink? { sink.withLock { $0 } }

    func wake() { current?.wake() }

    /// Starts (or, when the settings changed or the broker refused us, restarts) the sink for `config`; with no
    /// `mqtt.url`, stops it and stops queueing scans for it (what is queued stays for when it returns).
    func apply(_ config: BridgeConfig) {
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
        let provider = statusProvider.withLock { $0 }
        let fresh = MQTTSink(spool: spool, settings: settings, logger: logger, status: { provider?() ?? .object([]) })
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
}

extension BridgeService {
    /// The fields of the retained `<base>/status` message besides `online` (docs/contracts.md): only what changes
    /// with the device's health, so the message is republished on change, not on every read's timestamp.
    static func deviceStatus(
        spool: Spool, pipeline: Pipeline, sources: [StatusReporter.Source], gps: GPSClient?, config: BridgeConfig
    ) -> JSONValue {
        let counts = (try? spool.stats())?.counts ?? [:]
        let unpublished = (try? spool.sinkStats())?.first { $0.name == MQTTSink.sinkName }?.pending ?? 0
        let lastRead = pipeline.currentTally.lastRead.values.map(\.time).max()
        let fix: String = {
            guard config.location.enabled else { return "disabled" }
            if let gps, gps.status().fresh { return "gps" }
            return config.location.fixed != nil ? "fixed" : "none"
        }()
        return .object([
            ("version", .string(BridgeVersion.current)),
            ("sources", .object(sources.map { ($0.kind, .bool($0.up())) })),
            (
                "spool",
                .object([("pending", .integer(counts[.pending] ?? 0)), ("unpublished", .integer(unpublished))])
            ),
            ("lastReadAt", lastRead.map { .string(Timestamp.format($0)) } ?? .null),
            ("fix", .string(fix)),
        ])
    }
}
