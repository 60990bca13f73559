import BridgeCore
import Forwarder
import Foundation
import Logging
import Spool

/// The `scan` command's delivery: one attempt, recorded in the spool exactly as the service would.
public enum OneShotDelivery {
    /// `scan`'s single delivery attempt (docs/contracts.md, "Delivery order"): only when no earlier scan of the
    /// identifier is pending, else the scan is left to `run` so capture order holds. The outcome is recorded like
    /// the service would.
    public static func deliver(scanID: String, spool: Spool, api: APISettings, logger: Logger) {
        let now = Date()
        guard let record = try? spool.claimIfHead(id: scanID, now: now, lease: Forwarder.lease(api)) else {
            logger.info(
                "an earlier scan of this identifier is pending: delivery is left to the service", [("id", scanID)])
            return
        }
        guard let client = HTTPClient() else {
            logger.error("cannot create an HTTP client (libcurl)")
            try? spool.release(id: scanID)
            return
        }
        let outcome = Delivery(settings: api, client: client).attempt(record)
        let done = Date()
        var retryAt: Date?
        if case .retry(_, let retryAfter)? = outcome {
            retryAt = done.addingTimeInterval(
                Backoff().delay(attempt: 0, retryAfter: retryAfter, random: Double.random(in: 0...1)))
        }
        Forwarder.record(outcome, id: scanID, retryAt: retryAt, now: done, spool: spool, logger: logger)
        switch outcome {
        case .delivered?: logger.info("scan delivered", [("id", scanID)])
        case .retry(let reason, _)?:
            logger.warn(
                "delivery failed: the scan stays pending for the service", [("id", scanID), ("reason", reason)])
        case .authPaused(let reason)?, .redirected(let reason)?:
            logger.error("delivery refused: the scan stays pending", [("id", scanID), ("reason", reason)])
        case .dead?, nil: break
        }
    }

    /// The linked libcurl's version, for `plings-bridge version`.
    public static var curlVersion: String { HTTPClient.curlVersion }
}
