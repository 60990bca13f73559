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
        name: "api", statusKey: "api", statusAliases: ["delivery"], configSection: APIConfig.self,
        make: { SinkSlot<Forwarder, APISettings>(.api, context: $0) }, doctor: { APIDoctor.checks($0) },
        queue: { $0.api.url == nil ? nil : Spool.apiSink })
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

extension Forwarder: SlotSink {}

extension SinkSlotKind where Running == Forwarder, Settings == APISettings {
    /// The API forwarder, present while `api.url` is configured, with the spool's `api` queue registered; without
    /// it the queue is disabled, so reads are not queued for an API that is not there (a scan no sink queues is
    /// `kept`). A reload that adds the URL starts one, a reload that removes it stops it (what is queued stays
    /// queued, and goes when the URL is set again), a new
    /// `api.concurrency` makes a new one (its worker threads are made at start), and any other change of the API
    /// settings or the token reaches the running one (`Forwarder.reload`).
    static let api = SinkSlotKind(
        name: "api", queue: Spool.apiSink, settings: { APISettings($0) },
        make: { settings, context in
            do {
                try context.spool.registerSink(Spool.apiSink)
            } catch {
                // A full disk at start: the queue registered by an earlier start (if any) still holds what goes.
                context.logger.error(
                    "api: cannot register the API's queue; delivering what it holds", [("error", "\(error)")])
            }
            let forwarder = Forwarder(
                spool: context.spool, settings: settings, logger: context.logger,
                healthChanged: context.stateChanged, delivered: context.delivered)
            forwarder.start()
            return forwarder
        },
        reload: { forwarder, current, new in
            guard new.concurrency == current.concurrency else { return false }
            forwarder.reload(settings: new)
            return true
        },
        started: { ("api: delivery started: scans go to the API", [("url", $0.url)]) },
        replaced: { ("api: delivery restarted with the new api.concurrency", [("concurrency", "\($0.concurrency)")]) },
        removed:
            "api: delivery stopped: no api.url; reads are not queued for the API (those queued stay until it is set)",
        // The start summary names the API already.
        announcesAtStart: false,
        status: { running, context in
            // `delivery`: the forwarder's health and counters, or "local spool only" without an API.
            guard let forwarder = running?.sink else { return .object([("state", .string("local spool only"))]) }
            let stats = forwarder.currentStats
            let (state, reason) = forwarder.currentHealth.described
            return .object([
                ("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null),
                ("pending", .integer((try? context.spool.sinkStats(named: Spool.apiSink))?.pending ?? 0)),
                ("attempts", .integer(stats.attempts)), ("delivered", .integer(stats.delivered)),
                ("dead", .integer(stats.dead)), ("failures", .integer(stats.failures)),
            ])
        },
        metrics: { forwarder, _, _, metrics in
            let healthy: Double = forwarder.currentHealth == .healthy ? 1 : 0
            metrics.add("plings_bridge_api_healthy", healthy, help: "1 while the API accepts scans")
            // Its name before 0.3, kept for a release so that alerts written against it go on working.
            metrics.add(
                "plings_bridge_delivery_healthy", healthy,
                help: "1 while the API accepts scans (the former name of plings_bridge_api_healthy, until 0.3)")
        })
}
