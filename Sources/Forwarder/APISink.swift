import BridgeCore
import Foundation
import Logging
import Platform
import Plugins
import Spool

extension ScanSinkModule {
    /// The Plings API (`api` section): each pending scan sent as a `resolveIdentifier` mutation, in capture order
    /// per identifier. Its status member is `delivery`.
    public static let api = ScanSinkModule(
        name: "api", statusKey: "delivery", configSection: APIConfig.self,
        make: {
            APISink(
                spool: $0.spool, settings: APISettings($0.configuration), logger: $0.logger,
                healthChanged: $0.stateChanged, delivered: $0.delivered)
        },
        doctor: { APIDoctor.checks($0) })
}

extension APISettings {
    /// The forwarder's settings from the configuration and token, or nil when no API is configured (local spool
    /// only) or no token is loaded.
    public init?(_ configuration: SinkConfiguration) {
        let api = configuration.config.api
        guard let url = api.url, let token = configuration.apiToken else { return nil }
        self.init(
            url: url, token: token, document: api.document, timeout: api.timeout, concurrency: api.concurrency,
            batchSize: api.batchSize, allowInsecureHTTP: api.allowInsecureHTTP, userAgent: BridgeVersion.userAgent)
    }
}

/// The API forwarder, present while `api.url` is configured. A reload that adds the URL starts one, a reload
/// that removes it stops it (scans then stay in the local spool), and any other change of the API settings or
/// the token reaches the running one (`Forwarder.reload`).
final class APISink: ScanSink {
    let name = "forwarder"
    private let spool: Spool
    private let logger: Logger
    private let current: Mutex<Forwarder?>
    private let running = Mutex(false)
    private let healthChanged: @Sendable () -> Void
    private let delivered: @Sendable () -> Void

    /// `settings` nil: no API yet. Nothing starts before `start()`.
    init(
        spool: Spool, settings: APISettings?, logger: Logger, healthChanged: @escaping @Sendable () -> Void,
        delivered: @escaping @Sendable () -> Void
    ) {
        self.spool = spool
        self.logger = logger
        self.healthChanged = healthChanged
        self.delivered = delivered
        current = Mutex(
            settings.map {
                Forwarder(
                    spool: spool, settings: $0, logger: logger, healthChanged: healthChanged, delivered: delivered)
            })
    }

    private func makeForwarder(_ settings: APISettings) -> Forwarder {
        Forwarder(spool: spool, settings: settings, logger: logger, healthChanged: healthChanged, delivered: delivered)
    }

    /// The running forwarder, if any.
    var forwarder: Forwarder? { current.withLock { $0 } }

    func start() {
        running.withLock { $0 = true }
        forwarder?.start()
    }

    func stop(deadline: Double) {
        running.withLock { $0 = false }
        let stopping = current.withLock { slot -> Forwarder? in
            defer { slot = nil }
            return slot
        }
        stopping?.stop(deadline: deadline)
    }

    /// A scan was committed.
    func wake() { forwarder?.wake() }

    func apply(_ configuration: SinkConfiguration) { apply(APISettings(configuration)) }

    /// Applies reloaded API settings (nil: no `api.url`).
    private func apply(_ settings: APISettings?) {
        guard running.withLock({ $0 }) else { return }
        switch (forwarder, settings) {
        case (nil, nil):
            break
        case (nil, let settings?):
            let started = makeForwarder(settings)
            current.withLock { $0 = started }
            started.start()
            logger.info("delivery started: scans go to the API", [("url", settings.url)])
        case (let running?, nil):
            current.withLock { $0 = nil }
            running.stop(deadline: MonotonicClock.deadline(after: 3))
            logger.info("delivery stopped: api.url was removed; scans stay in the local spool")
        case (let running?, let settings?) where settings.concurrency != running.concurrency:
            // The worker threads are made at start: a new concurrency needs a new forwarder. Claimed scans are
            // released by the old one's stop, so the new one takes them at once.
            running.stop(deadline: MonotonicClock.deadline(after: 3))
            let started = makeForwarder(settings)
            current.withLock { $0 = started }
            started.start()
            logger.info("delivery restarted with the new api.concurrency", [("concurrency", "\(settings.concurrency)")])
        case (let running?, let settings?):
            running.reload(settings: settings)
        }
    }

    /// `delivery`: the forwarder's health and counters, or "local spool only" without an API.
    var statusEntry: JSONValue {
        guard let forwarder else { return .object([("state", .string("local spool only"))]) }
        let stats = forwarder.currentStats
        let (state, reason): (String, String?) = {
            switch forwarder.currentHealth {
            case .starting, .healthy: return ("delivering", nil)
            case .failing(let reason, _): return ("failing", reason)
            case .paused(let reason, _): return ("paused", reason)
            }
        }()
        return .object([
            ("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null),
            ("attempts", .integer(stats.attempts)), ("delivered", .integer(stats.delivered)),
            ("dead", .integer(stats.dead)), ("failures", .integer(stats.failures)),
        ])
    }

    func addMetrics(to metrics: inout MetricsText) {
        guard let forwarder else { return }
        let healthy: Double = forwarder.currentHealth == .healthy ? 1 : 0
        metrics.add("plings_bridge_delivery_healthy", healthy, help: "1 while the API accepts scans")
    }
}
