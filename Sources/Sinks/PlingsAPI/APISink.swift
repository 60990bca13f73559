import BridgeCore
import Foundation
import Logging
import Platform
import SinkKit
import Spool

extension ScanSinkModule {
    /// The Plings API (`api` section): each pending scan sent as a `resolveIdentifier` mutation, in capture order
    /// per identifier, by `api.concurrency` workers. Its former status member `delivery` is an alias until 0.3.
    public static let api = ScanSinkModule(
        name: "api", statusKey: "api", statusAliases: ["delivery"], configSection: APIConfig.self,
        make: { SinkSlot<QueuedSink<APISettings>, APISettings>(.api, context: $0) }, doctor: { APIDoctor.checks($0) },
        queue: { $0.api.url == nil ? nil : QueuedSinkKind.api.name })
}

extension QueuedSinkKind<APISettings> {
    /// The API as a queue sink: its queue is `api` (`Spool.apiSink`), its workers `api.concurrency`, its token a
    /// secret of the logs; a new token, URL or batch size reaches the next request without a restart.
    public static let api = QueuedSinkKind(
        name: Spool.apiSink, settings: { APISettings($0) }, describe: { [("url", $0.url)] },
        workers: { $0.concurrency }, secrets: { [$0.token] },
        voice: { current in .api(url: { current().url }) },
        transport: { current, logger in APITransport(current: current, logger: logger) })
}

extension SinkSlotKind where Running == QueuedSink<APISettings>, Settings == APISettings {
    /// The API's slot: present while `api.url` is configured, with the spool's `api` queue registered; without it
    /// the queue is disabled, so reads are not queued for an API that is not there (a scan no sink queues is
    /// `kept`). A reload that adds the URL starts it, one that removes it stops it (what is queued stays queued,
    /// and goes when the URL is set again), a new `api.concurrency` makes a new one.
    static let api = SinkSlotKind.queued(
        .api,
        lines: QueuedSinkLines(
            started: { ("api: delivery started: scans go to the API", [("url", $0.url)]) },
            replaced: {
                ("api: delivery restarted with the new api.concurrency", [("concurrency", "\($0.concurrency)")])
            },
            removed:
                "api: delivery stopped: no api.url; reads are not queued for the API (those queued stay until it is set)"
        ),
        metrics: { sink, metrics in
            let healthy: Double = sink.currentHealth == .healthy ? 1 : 0
            metrics.add("plings_bridge_api_healthy", healthy, help: "1 while the API accepts scans")
            // Its name before 0.3, kept for a release so that alerts written against it go on working.
            metrics.add(
                "plings_bridge_delivery_healthy", healthy,
                help: "1 while the API accepts scans (the former name of plings_bridge_api_healthy, until 0.3)")
        })
}

extension APISettings {
    /// The API sink's settings from the configuration and token, or nil when no API is configured (local spool
    /// only) or no token is loaded.
    public init?(_ configuration: SinkConfiguration) {
        let api = configuration.config.api
        guard let url = api.url, let token = configuration.apiToken else { return nil }
        self.init(
            url: url, token: token, document: api.document, timeout: api.timeout, concurrency: api.concurrency,
            batchSize: api.batchSize, allowInsecureHTTP: api.allowInsecureHTTP, userAgent: BridgeVersion.userAgent)
    }
}
