import BridgeCore
import Foundation
import Logging
import Spool

/// Drains pending scans from the spool to the API (design 2.3): per-identifier capture order, bounded
/// concurrency across identifiers, backoff that never drops a scan, one log line per change of health.
///
/// One coordinator thread claims due scans and hands them to `concurrency` worker threads, each with its own
/// keep-alive HTTP client. All of them block (condition variable, libcurl) and none runs on the Swift
/// cooperative pool. When idle the coordinator sleeps until a scan is committed (`wake`), the earliest backoff
/// ends, or another process changes the spool (checked every 2 s through SQLite's `data_version`).
public final class Forwarder: @unchecked Sendable {
    // All mutable state below is guarded by `condition`.
    private let condition = NSCondition()
    private var settings: APISettings
    private var stopping = false
    private var wakeRequested = true
    private var jobs: [ScanRecord] = []
    private var inFlight: [String: String] = [:]  // scan id -> identifier
    private var health: Health = .healthy
    private var consecutiveFailures = 0
    private var notBefore: Date?
    private var workersRunning = 0
    private var coordinatorRunning = false
    private var clients: [HTTPClient] = []
    private var stats = Stats()
    /// Consecutive failures to claim from the spool (disk full, I/O error), for backoff and one log line.
    private var spoolFailures = 0

    private let spool: Spool
    private let logger: Logger
    private let backoff = Backoff(base: 1, cap: 300)
    /// How long an auth pause lasts before one probe is tried (a SIGHUP ends it at once).
    public static let authPause: Double = 300
    /// How long a claimed scan is reserved: the request timeout plus a margin. If this process dies, another
    /// `run` sends the scan again after this long (the idempotency key makes the repeat harmless).
    public static func lease(_ settings: APISettings) -> Double { settings.timeout + 5 }

    /// How often other processes' spool changes are looked for while idle (design 2.4: "within about 2 s").
    public static let spoolCheckInterval: Double = 2

    /// Delivery health, for logs and `status`.
    public enum Health: Sendable, Equatable {
        case healthy
        case failing(reason: String, since: Date)
        case authPaused(reason: String, until: Date)
    }

    /// Counters for metrics and benchmarks.
    public struct Stats: Sendable {
        public var attempts = 0
        public var delivered = 0
        public var dead = 0
        public var failures = 0
    }

    public init(spool: Spool, settings: APISettings, logger: Logger) {
        self.spool = spool
        self.settings = settings
        self.logger = logger
    }

    public var currentHealth: Health { condition.withLock { health } }
    public var currentStats: Stats { condition.withLock { stats } }

    /// Starts the coordinator and workers.
    public func start() {
        condition.withLock {
            coordinatorRunning = true
            workersRunning = settings.concurrency
        }
        for index in 0..<settings.concurrency {
            guard let client = HTTPClient() else {
                logger.error("cannot create an HTTP client (libcurl)")
                condition.withLock { workersRunning -= 1 }
                continue
            }
            condition.withLock { clients.append(client) }
            let thread = Thread { [self] in workerLoop(client) }
            thread.name = "forwarder-\(index)"
            thread.start()
        }
        let coordinator = Thread { [self] in coordinatorLoop() }
        coordinator.name = "forwarder"
        coordinator.start()
    }

    /// A scan was committed: look for work now.
    public func wake() {
        condition.withLock {
            wakeRequested = true
            condition.broadcast()
        }
    }

    /// SIGHUP: new settings (token, URL...) and an auth pause ends at once.
    public func reload(settings newSettings: APISettings) {
        condition.withLock {
            // Concurrency is fixed at start; the rest applies to the next request.
            var updated = newSettings
            updated.concurrency = settings.concurrency
            settings = updated
            if case .authPaused = health {
                health = .healthy
                notBefore = nil
                logger.info("delivery resumed: configuration reloaded")
            }
            wakeRequested = true
            condition.broadcast()
        }
    }

    /// Stops taking work; in-flight requests get until `timeout` to finish, then are abandoned (their scans
    /// stay pending). Returns when every thread has stopped or the time is up.
    public func stop(timeout: Double = 4.5) {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        stopping = true
        jobs.removeAll()
        condition.broadcast()
        let graceful = Date().addingTimeInterval(max(0, timeout - 1))
        while workersRunning > 0 || coordinatorRunning {
            if Date() >= graceful { clients.forEach { $0.cancel() } }
            if !condition.wait(until: min(deadline, Date().addingTimeInterval(0.25))), Date() >= deadline { break }
        }
        condition.unlock()
    }

    // MARK: coordinator

    private func coordinatorLoop() {
        var lastDataVersion = (try? spool.dataVersion()) ?? 0
        // The earliest due time of unclaimed pending scans, as last read from the spool.
        var nextDue: Date?
        condition.lock()
        while !stopping {
            let now = Date()
            var waitUntil = now.addingTimeInterval(Forwarder.spoolCheckInterval)
            let capacity: Int
            switch health {
            // Claim up to twice the workers so a worker never waits for the next claim transaction.
            case .healthy: capacity = 2 * settings.concurrency - inFlight.count
            // While failing or paused: one probe at a time, once the backoff is over.
            case .failing, .authPaused:
                let open = notBefore.map { now >= $0 } ?? true
                capacity = open && inFlight.isEmpty ? 1 : 0
                if !open, let notBefore { waitUntil = min(waitUntil, notBefore) }
            }
            if capacity > 0 {
                if wakeRequested || (nextDue.map { $0 <= now } ?? false) {
                    wakeRequested = false
                    let busy = Set(inFlight.values)
                    condition.unlock()
                    var claimed: [ScanRecord] = []
                    var spoolError: SpoolError?
                    do {
                        claimed = try spool.claimDeliverable(
                            now: now, lease: Forwarder.lease(settings), limit: capacity, busy: busy)
                    } catch {
                        spoolError = error
                    }
                    // Nothing claimable: learn when the next identifier's head will be due (one scan of the pending
                    // rows, only then). A scan waiting behind one of its identifier in flight is not counted:
                    // that worker's completion wakes us.
                    let due = claimed.isEmpty && spoolError == nil ? ((try? spool.nextDueTime()) ?? nil) : nextDue
                    condition.lock()
                    // A head due now that the claim did not take (another process leased it between the two
                    // queries) gets a short timer rather than a busy loop.
                    nextDue = due.map { $0 > now ? $0 : now.addingTimeInterval(0.5) }
                    if let spoolError {
                        // The spool refuses even our bookkeeping (disk full, I/O error): back off instead of
                        // retrying at once, and say so once, not once per attempt.
                        spoolFailures += 1
                        let delay = min(30, 0.5 * Double(1 << min(spoolFailures, 6)))
                        if spoolFailures == 1 {
                            logger.error(
                                "delivery: cannot use the spool; retrying with backoff",
                                [("error", spoolError.description)])
                        }
                        nextDue = now.addingTimeInterval(delay)
                        waitUntil = min(waitUntil, now.addingTimeInterval(delay))
                        _ = condition.wait(until: waitUntil)
                        if !stopping { wakeRequested = true }
                        continue
                    }
                    if spoolFailures > 0 {
                        logger.info("delivery: the spool is usable again", [("after", "\(spoolFailures) attempts")])
                        spoolFailures = 0
                    }
                    if !claimed.isEmpty {
                        for record in claimed {
                            inFlight[record.id] = record.identifier ?? record.id
                            jobs.append(record)
                        }
                        condition.broadcast()
                        // There may be more due work than capacity: look again as soon as there is room.
                        wakeRequested = claimed.count == capacity
                        continue
                    }
                    if wakeRequested { continue }
                }
                if let nextDue { waitUntil = min(waitUntil, max(nextDue, now)) }
            }
            let timedOut = !condition.wait(until: waitUntil)
            if stopping { break }
            if timedOut && !wakeRequested {
                // Other processes (`scan`, `spool retry`) change the spool without waking us: notice it.
                condition.unlock()
                let version = (try? spool.dataVersion()) ?? lastDataVersion
                condition.lock()
                if version != lastDataVersion {
                    lastDataVersion = version
                    wakeRequested = true
                }
            }
        }
        coordinatorRunning = false
        condition.broadcast()
        condition.unlock()
    }

    // MARK: workers

    private func workerLoop(_ client: HTTPClient) {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if stopping {
                workersRunning -= 1
                condition.broadcast()
                condition.unlock()
                return
            }
            let record = jobs.removeFirst()
            let current = settings
            stats.attempts += 1
            condition.unlock()

            let outcome = Delivery(settings: current, client: client).attempt(record)
            let now = Date()
            let transition = condition.withLock { apply(outcome, to: record, now: now) }
            // Record first, then free the identifier: the next scan of it is claimed only once this one's
            // outcome is durable.
            store(outcome, record: record, now: now, retryAt: transition.retryAt)
            let except = condition.withLock {
                inFlight.removeValue(forKey: record.id)
                return Set(inFlight.keys)
            }
            if transition.backlogDue { _ = try? spool.makeBackoffDue(now: now, except: except) }
            wake()
        }
    }

    /// Updates health from one outcome (under the lock); logs only when health changes.
    private func apply(_ outcome: DeliveryOutcome?, to record: ScanRecord, now: Date) -> (
        retryAt: Date?, backlogDue: Bool
    ) {
        guard let outcome else { return (nil, false) }
        switch outcome {
        case .delivered, .dead:
            if case .delivered = outcome { stats.delivered += 1 } else { stats.dead += 1 }
            var recovered = false
            switch health {
            case .healthy: break
            case .failing(_, let since):
                logger.info(
                    "delivery resumed: the API answers again",
                    [
                        ("downFor", String(format: "%.1fs", now.timeIntervalSince(since))),
                        ("failedAttempts", String(consecutiveFailures)),
                    ])
                recovered = true
            case .authPaused:
                logger.info("delivery resumed: the API accepts the token again")
                recovered = true
            }
            health = .healthy
            consecutiveFailures = 0
            notBefore = nil
            return (nil, recovered)
        case .retry(let reason, let retryAfter):
            stats.failures += 1
            let delay = backoff.delay(
                attempt: consecutiveFailures, retryAfter: retryAfter, random: Double.random(in: 0...1))
            consecutiveFailures += 1
            if case .healthy = health {
                logger.warn(
                    "delivery failing: scans stay pending and are retried with backoff",
                    [("reason", reason), ("url", settings.url)])
                health = .failing(reason: reason, since: now)
            }
            let retryAt = now.addingTimeInterval(delay)
            notBefore = retryAt
            return (retryAt, false)
        case .authPaused(let reason):
            stats.failures += 1
            if case .authPaused = health {
            } else {
                logger.error(
                    "delivery paused: the API refused the token; fix it and send SIGHUP (retrying in 5 min)",
                    [("reason", reason)])
            }
            let until = now.addingTimeInterval(Forwarder.authPause)
            health = .authPaused(reason: reason, until: until)
            notBefore = until
            return (nil, false)
        }
    }

    /// Writes the attempt's result to the spool (outside the lock: it is a disk write).
    private func store(_ outcome: DeliveryOutcome?, record: ScanRecord, now: Date, retryAt: Date?) {
        do {
            switch outcome {
            case nil:
                try spool.release(id: record.id)
            case .delivered(let response)?:
                try spool.recordOutcome(id: record.id, outcome: .delivered(response: response), now: now)
                logger.debug("scan delivered", [("id", record.id)])
            case .dead(let reason, let response)?:
                try spool.recordOutcome(id: record.id, outcome: .dead(reason: reason, response: response), now: now)
                logger.warn(
                    "scan refused by the API: kept as dead (spool retry revives it)",
                    [("id", record.id), ("reason", reason)])
            case .retry(let reason, _)?:
                try spool.recordOutcome(
                    id: record.id, outcome: .retry(reason: reason, nextAttempt: retryAt ?? now), now: now)
            case .authPaused(let reason)?:
                try spool.recordPaused(id: record.id, reason: reason, now: now)
            }
        } catch {
            logger.error("delivery: cannot record the outcome", [("id", record.id), ("error", error.description)])
        }
    }
}

extension NSCondition {
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
