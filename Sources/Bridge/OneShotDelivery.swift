import BridgeCore
import Forwarder
import Foundation
import Logging
import Spool

/// The `scan` command's delivery: one attempt, recorded in the spool exactly as the service would.
public enum OneShotDelivery {
    /// `scan`'s single delivery attempt (design 2.3): only when no earlier scan of the identifier is pending,
    /// else the scan is left to `run` so capture order holds. The outcome is recorded like the service would.
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
        do {
            switch outcome {
            case nil:
                try spool.release(id: scanID)
            case .delivered(let response)?:
                try spool.recordOutcome(id: scanID, outcome: .delivered(response: response), now: done)
                logger.info("scan delivered", [("id", scanID)])
            case .dead(let reason, let response)?:
                try spool.recordOutcome(id: scanID, outcome: .dead(reason: reason, response: response), now: done)
                logger.warn("scan refused by the API: kept as dead", [("id", scanID), ("reason", reason)])
            case .retry(let reason, let retryAfter)?:
                let delay = Backoff().delay(attempt: 0, retryAfter: retryAfter, random: Double.random(in: 0...1))
                try spool.recordOutcome(
                    id: scanID, outcome: .retry(reason: reason, nextAttempt: done.addingTimeInterval(delay)), now: done)
                logger.warn(
                    "delivery failed: the scan stays pending for the service", [("id", scanID), ("reason", reason)])
            case .authPaused(let reason)?:
                try spool.recordPaused(id: scanID, reason: reason, now: done)
                logger.error("the API refused the token: the scan stays pending", [("id", scanID), ("reason", reason)])
            }
        } catch {
            logger.error("cannot record the delivery outcome", [("id", scanID), ("error", "\(error)")])
        }
    }

    /// The linked libcurl's version, for `plings-bridge version`.
    public static var curlVersion: String { HTTPClient.curlVersion }
}
