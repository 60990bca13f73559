import BridgeCore
import Foundation
import HTTPTransport
import Logging
import Platform
import Plugins
import Spool

/// Delivers pending scans to the API (docs/contracts.md, "HTTP request"): the queue sink runner
/// (`QueuedSinkRunner`: per-identifier capture order, bounded concurrency across identifiers, backoff that never
/// drops a scan, one log line per change of health) with the API's transport and the API's words. `concurrency`
/// workers, each with its own keep-alive HTTP client.
public final class Forwarder: Service {
    public let name = "api"
    private let runner: QueuedSinkRunner
    private let transport: APITransport

    public static var backoff: Backoff { QueuedSinkRunner.backoff }
    /// How long a claimed scan is reserved: the request timeout plus a margin. If this process dies, another
    /// `run` sends the scan again after this long (the idempotency key makes the repeat harmless).
    public static func lease(_ settings: APISettings) -> Double { settings.timeout + 5 }

    /// Counters for metrics and benchmarks, in scans.
    public typealias Stats = DeliveryStats

    public init(
        spool: Spool, settings: APISettings, logger: Logger, healthChanged: @escaping @Sendable () -> Void = {},
        delivered: @escaping @Sendable () -> Void = {}
    ) {
        let transport = APITransport(settings: settings, logger: logger)
        self.transport = transport
        runner = QueuedSinkRunner(
            name: "api", sink: Spool.apiSink, spool: spool, transport: transport, workers: settings.concurrency,
            voice: .api(url: { transport.settings.url }), logger: logger,
            healthChanged: healthChanged, delivered: delivered)
    }

    /// Delivery health, for `status` and the metrics. Paused: the API refused the token, or the URL redirects; no
    /// delivery until a reload or the pause ends.
    public var currentHealth: SinkHealth.State { runner.currentHealth }
    public var currentStats: Stats { runner.currentStats }

    /// Starts the workers and the thread that claims for them.
    public func start() { runner.start() }

    /// A scan was committed: look for work now.
    public func wake() { runner.wake() }

    /// SIGHUP: new settings (token, URL...) for the next request, and a pause or a backoff ends at once: the
    /// operator fixed something (the URL, the network, the token) and the next attempt goes now, not up to five
    /// minutes later. Concurrency is fixed at start (the slot makes a new forwarder for a new one).
    public func reload(settings: APISettings) {
        transport.update(settings)
        runner.resume()
    }

    /// Stops taking work; requests in flight get until one second before the monotonic `deadline` to finish,
    /// then are cancelled (their scans stay pending). Returns when every thread has stopped or by the deadline.
    public func stop(deadline: Double) { runner.stop(deadline: deadline) }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 4.5) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    /// What `deliverOnce` did.
    public enum OneAttempt: Sendable {
        /// An earlier scan of the identifier is pending: the scan is left to the service so capture order holds.
        case notHead
        /// libcurl gave no client; the scan was released untouched.
        case noClient
        /// The attempt's outcome, recorded in the spool (nil: cancelled, the scan was released).
        case sent(DeliveryOutcome?)
    }

    /// `scan`'s single delivery attempt (docs/contracts.md, "Delivery order"): only when no earlier scan of the
    /// identifier is pending, sent, recorded and told exactly as a worker does, a retry due after the first backoff.
    public static func deliverOnce(scanID: String, spool: Spool, settings: APISettings, logger: Logger) -> OneAttempt {
        let ledger = spool.ledger(Spool.apiSink)
        guard let record = try? ledger.claimIfHead(id: scanID, now: Date(), lease: lease(settings)) else {
            return .notHead
        }
        guard let client = HTTPClient() else {
            logger.error("cannot create an HTTP client (libcurl)")
            try? ledger.release(id: scanID)
            return .noClient
        }
        let outcome = Delivery(settings: settings, client: client).attempt(record)
        let now = Date()
        var retryAt: Date?
        if case .retry(_, let retryAfter)? = outcome {
            retryAt = now.addingTimeInterval(
                backoff.delay(attempt: 0, retryAfter: retryAfter, random: Double.random(in: 0...1)))
        }
        let voice = QueuedSinkVoice.api(url: { settings.url })
        do {
            try ledger.recordAttempts(
                batch: record.id, [(record.id, QueuedSinkRunner.attemptRecord(outcome, retryAt: retryAt, now: now))],
                keepBatch: !QueuedSinkRunner.isFinal(outcome), now: now)
        } catch {
            // No retry here, unlike a worker's: the scan stays leased and the service sends it after the lease.
            logger.error(
                "\(voice.prefix): cannot record the outcome", [("id", record.id), ("error", error.description)])
        }
        voice.tell(outcome, id: record.id, logger: logger)
        return .sent(outcome)
    }
}
