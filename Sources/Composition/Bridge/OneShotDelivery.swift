import BridgeCore
import PlingsAPI
import HTTPTransport
import Logging
import SinkKit
import SourceKit
import Spool

/// The `scan` command's delivery: one attempt through the API sink's own path (`QueuedSink.deliverOnce`),
/// recorded in the spool exactly as the service would; this adds the lines a person running `scan` reads.
public enum OneShotDelivery {
    /// `scan`'s single delivery attempt (docs/contracts.md, "Delivery order"): only when no earlier scan of the
    /// identifier is pending, else the scan is left to `run` so capture order holds.
    public static func deliver(scanID: String, spool: Spool, api: APISettings, logger: Logger) {
        switch QueuedSink.deliverOnce(.api, scanID: scanID, settings: api, spool: spool, logger: logger) {
        case .notHead:
            logger.info(
                "an earlier scan of this identifier is pending: delivery is left to the service", [("id", scanID)])
        case .noConnection, .sent(nil), .sent(.dead?):
            break
        case .sent(.delivered?):
            logger.info("scan delivered", [("id", scanID)])
        case .sent(.retry(let reason, _)?):
            logger.warn(
                "delivery failed: the scan stays pending for the service", [("id", scanID), ("reason", reason)])
        case .sent(.authPaused(let reason)?), .sent(.redirected(let reason)?):
            logger.error("delivery refused: the scan stays pending", [("id", scanID), ("reason", reason)])
        }
    }

    /// The linked libcurl's version, for `plings-bridge version`.
    public static var curlVersion: String { HTTPClient.curlVersion }
}
