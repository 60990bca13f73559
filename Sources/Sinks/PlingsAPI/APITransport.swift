import BridgeCore
import Foundation
import HTTPTransport
import Logging
import Platform
import SinkKit
import Spool

/// The API's side of the runner (docs/contracts.md, "HTTP request"): a keep-alive HTTP client per worker, each
/// request built from the settings of the moment (a reload reaches the next request).
struct APITransport: QueuedSinkTransport {
    let current: @Sendable () -> APISettings
    let logger: Logger

    var settings: APISettings { current() }

    var batchSize: Int { settings.batchTemplate == nil ? 1 : settings.batchSize }
    /// How long a claimed scan is reserved: the request timeout plus a margin. If this process dies, another
    /// `run` sends the scan again after this long (the idempotency key makes the repeat harmless).
    var lease: Double { settings.timeout + 5 }

    func connect() -> (any QueuedSinkConnection)? {
        guard let client = HTTPClient() else {
            logger.error("cannot create an HTTP client (libcurl)")
            return nil
        }
        return APIConnection(transport: self, client: client)
    }
}

/// One worker's client: a lone scan as a `resolveIdentifier` mutation, several as one batched request.
struct APIConnection: QueuedSinkConnection {
    let transport: APITransport
    let client: HTTPClient

    func cancel() { client.cancel() }

    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? {
        let settings = transport.settings
        let delivery = Delivery(settings: settings, client: client)
        if batch.records.count == 1 { return delivery.attempt(batch.records[0]).map(QueuedAnswer.whole) }
        guard let template = settings.batchTemplate else {
            // The document changed under a reload and can no longer be batched: these go one by one.
            return .each(batch.records.map { _ in nil })
        }
        switch delivery.attempt(batch, template: template) {
        case nil: return nil
        case .whole(let outcome)?: return .whole(outcome)
        case .each(let outcomes)?: return .each(outcomes)
        case .refused(let reason)?: return .refused(reason: reason)
        }
    }
}

extension QueuedSinkVoice {
    /// The API's lines (docs/operations.md quotes them); `url` is the configured one at the time of the line.
    static func api(url: @escaping @Sendable () -> String) -> QueuedSinkVoice {
        QueuedSinkVoice(
            prefix: "api: delivery", deliveredScan: "api: scan delivered",
            failing: {
                (
                    "api: delivery failing: scans stay pending and are retried with backoff",
                    [("reason", $0), ("url", url())]
                )
            },
            resumed: { downFor, failedAttempts, afterPause in
                afterPause
                    ? ("api: delivery resumed: the API accepts the requests again", [])
                    : (
                        "api: delivery resumed: the API answers again",
                        [("downFor", String(format: "%.1fs", downFor)), ("failedAttempts", String(failedAttempts))]
                    )
            },
            paused: { outcome in
                if case .redirected(let reason) = outcome {
                    return (
                        "api: delivery paused: api.url redirects and redirects are not followed (the token would go "
                            + "elsewhere); fix api.url and send SIGHUP (retrying in 5 min)",
                        [("reason", reason), ("url", url())]
                    )
                }
                return (
                    "api: delivery paused: the API refused the token; fix it and send SIGHUP (retrying in 5 min)",
                    [("reason", outcome.reason ?? "")]
                )
            },
            refusedScan: {
                ("scan refused by the API: kept as dead (spool retry revives it)", [("id", $0), ("reason", $1)])
            },
            refusedBatches: {
                ("the API refused a batched request: sending one scan per request until a reload", [("reason", $0)])
            })
    }
}
