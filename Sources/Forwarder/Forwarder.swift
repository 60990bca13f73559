import BridgeCore
import Foundation
import HTTPTransport
import Logging
import Platform
import Spool

/// Drains pending scans from the spool to the API (docs/contracts.md, "HTTP request"): per-identifier capture
/// order, bounded concurrency across identifiers, backoff that never drops a scan, one log line per change of
/// health.
///
/// One coordinator thread claims due scans and hands them to `concurrency` worker threads, each with its own
/// keep-alive HTTP client. All of them block (a condition variable, libcurl) and none runs on the Swift
/// cooperative pool. When idle the coordinator sleeps until a scan is committed or another process changes the
/// spool (`wake`, from the pipeline and from `SpoolChangeWatch`) or the earliest backoff ends; nothing else wakes it.
///
/// Every wait is on the monotonic clock. The spool's times (`next_attempt_at`, leases) are wall-clock times,
/// because they outlive the process; a wall clock stepped back makes them lie far ahead, so the spool treats a
/// time further ahead than `Spool.longestWait` as due now (a step forward just makes waits end early).
public final class Forwarder: Service {
    /// Everything that changes, guarded by one monitor.
    private struct State {
        var settings: APISettings
        var stopping = false
        var wakeRequested = true
        /// Requests claimed and not yet taken by a worker.
        var jobs: [Job] = []
        var inFlight: [String: String] = [:]  // scan id -> identifier
        /// Requests claimed and not yet answered (queued or being sent).
        var requests = 0
        /// The API refused a batched request as such: one scan per request until a reload.
        var batchesRefused = false
        /// Healthy, failing or paused, and when the next probe may go (the model every sink shares).
        var health = SinkHealth(backoff: Forwarder.backoff, pauseDuration: Forwarder.pauseDuration)
        var workersRunning = 0
        var coordinatorRunning = false
        var clients: [HTTPClient] = []
        var stats = Stats()
        /// Consecutive failures to claim from the spool (disk full, I/O error), for backoff and one log line.
        var spoolFailures = 0
        /// A reload ended a backoff: the scans waiting out theirs are made due before the next claim.
        var backlogDueRequested = false
    }

    public let name = "forwarder"
    private let state: Monitor<State>
    /// The coordinator and the workers (`WorkerThread`: joinable, and an end nobody asked for is reported).
    private let workers = WorkerThreads()
    /// The API's queue in the spool: its claims, batches and outcomes.
    private let ledger: DeliveryLedger
    private let logger: Logger
    /// Told after health changed (failing, resumed, paused), outside the lock: `status` follows at once.
    private let healthChanged: @Sendable () -> Void
    /// Told after an outcome was recorded in the spool (its counts changed).
    private let delivered: @Sendable () -> Void
    static let backoff = Backoff(base: 1, cap: 300)
    /// The wait after the spool refused our bookkeeping (a full disk): 1 s doubling to 30 s.
    static let spoolBackoff = Backoff(base: 0.5, cap: 30)
    /// How long a delivery pause (refused token, redirect) lasts before one probe is tried (SIGHUP ends it).
    public static let pauseDuration: Double = 300
    /// How long a claimed scan is reserved: the request timeout plus a margin. If this process dies, another
    /// `run` sends the scan again after this long (the idempotency key makes the repeat harmless).
    public static func lease(_ settings: APISettings) -> Double { settings.timeout + 5 }

    /// One request's scans and the settings it goes with.
    private struct Job {
        var batch: DeliveryBatch
        var settings: APISettings
        /// Claimed while delivery was failing or paused: the one probe the backoff allows. A job claimed while
        /// healthy is not sent once delivery has failed since (its scans are released for the probe).
        var probe: Bool
        /// When a worker took it to send (monotonic): a failure of a request sent before the last recorded one is
        /// the same round's, not another probe's (`SinkHealth.failed`).
        var sentAt: Double = 0
    }

    /// Counters for metrics and benchmarks, in scans.
    public typealias Stats = DeliveryStats

    public init(
        spool: Spool, settings: APISettings, logger: Logger, healthChanged: @escaping @Sendable () -> Void = {},
        delivered: @escaping @Sendable () -> Void = {}
    ) {
        self.delivered = delivered
        self.ledger = spool.ledger(Spool.apiSink)
        self.state = Monitor(State(settings: settings))
        self.logger = logger
        self.healthChanged = healthChanged
    }

    /// Delivery health, for `status` and the metrics. Paused: the API refused the token, or the URL redirects; no
    /// delivery until a reload or the pause ends.
    public var currentHealth: SinkHealth.State { state.withLock { $0.health.state } }
    public var currentStats: Stats { state.withLock { $0.stats } }

    /// Starts the coordinator and workers.
    public func start() {
        let concurrency = state.withLock { s in
            s.coordinatorRunning = true
            s.workersRunning = s.settings.concurrency
            return s.settings.concurrency
        }
        for index in 0..<concurrency {
            guard let client = HTTPClient() else {
                logger.error("cannot create an HTTP client (libcurl)")
                state.update { $0.workersRunning -= 1 }
                continue
            }
            state.withLock { $0.clients.append(client) }
            workers.start(name: "forwarder-\(index)", watched: true) { [self] in workerLoop(client) }
        }
        workers.start(name: "forwarder", watched: true) { [self] in coordinatorLoop() }
    }

    /// A scan was committed: look for work now.
    public func wake() {
        state.update { $0.wakeRequested = true }
    }

    /// SIGHUP: new settings (token, URL...), and a pause or a backoff ends at once: the operator fixed something
    /// (the URL, the network, the token) and the next attempt goes now, not up to five minutes later.
    public func reload(settings newSettings: APISettings) {
        let (resumed, retrying) = state.update { s in
            // Concurrency is fixed at start; the rest applies to the next request.
            var updated = newSettings
            updated.concurrency = s.settings.concurrency
            s.settings = updated
            s.wakeRequested = true
            s.batchesRefused = false
            let retrying = s.health.endBackoff(clock: MonotonicClock.now())
            if retrying { s.backlogDueRequested = true }
            return (s.health.endPause(), retrying)
        }
        if resumed {
            logger.info("delivery resumed: configuration reloaded")
            healthChanged()
        } else if retrying {
            logger.info("delivery: configuration reloaded; trying again now")
        }
    }

    /// Stops taking work; in-flight requests get until one second before the monotonic `deadline` to finish,
    /// then are cancelled (their scans stay pending). Scans claimed but not yet sent are released at once.
    /// Returns when every thread has stopped or the deadline has passed.
    public func stop(deadline: Double) {
        workers.expectEnd()
        let (clients, unsent) = state.update { s in
            s.stopping = true
            let unsent = s.jobs.flatMap { $0.batch.records.map(\.id) }
            s.jobs.removeAll()
            return (s.clients, unsent)
        }
        for id in unsent { try? ledger.release(id: id) }
        let finished: (inout State) -> Bool = { $0.workersRunning == 0 && !$0.coordinatorRunning }
        if !state.wait(until: deadline - 1, for: finished) {
            clients.forEach { $0.cancel() }
            state.wait(until: deadline, for: finished)
        }
        workers.join(until: deadline)
    }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 4.5) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    // MARK: coordinator

    /// What the coordinator does next, decided under the lock.
    private enum Step {
        case stop
        case claim(requests: Int, batchSize: Int, busy: Set<String>, lease: Double, makeDue: Set<String>?)
        case sleep(until: Double)
    }

    private func coordinatorLoop() {
        // When the earliest unclaimed pending scan becomes due, on the monotonic clock.
        var dueAt: Double?
        loop: while true {
            let now = MonotonicClock.now()
            let step: Step = state.withLock { s in
                if s.stopping { return .stop }
                var sleepUntil = Double.infinity
                let capacity = Forwarder.capacity(s, now: now)
                if capacity == 0, let notBefore = s.health.notBefore, notBefore > now {
                    sleepUntil = min(sleepUntil, notBefore)
                }
                if capacity > 0 {
                    if s.wakeRequested || (dueAt.map { $0 <= now } ?? false) {
                        s.wakeRequested = false
                        let batchSize =
                            s.batchesRefused || s.settings.batchTemplate == nil ? 1 : s.settings.batchSize
                        defer { s.backlogDueRequested = false }
                        return .claim(
                            requests: capacity, batchSize: batchSize, busy: Set(s.inFlight.values),
                            lease: Forwarder.lease(s.settings),
                            makeDue: s.backlogDueRequested ? Set(s.inFlight.keys) : nil)
                    }
                    if let dueAt { sleepUntil = min(sleepUntil, max(dueAt, now)) }
                }
                return .sleep(until: sleepUntil)
            }
            switch step {
            case .stop:
                break loop
            case .claim(let capacity, let batchSize, let busy, let lease, let makeDue):
                let wallNow = Date()
                if let inFlight = makeDue { _ = try? ledger.makeBackoffDue(now: wallNow, except: inFlight) }
                let claimed: [DeliveryBatch]
                do {
                    claimed = try ledger.claimBatches(
                        now: wallNow, lease: lease, batches: capacity, batchSize: batchSize, busy: busy)
                } catch {
                    spoolRefused(error, now: now)
                    dueAt = nil
                    continue
                }
                state.withLock { s in
                    if s.spoolFailures > 0 {
                        logger.info("delivery: the spool is usable again", [("after", "\(s.spoolFailures) attempts")])
                        s.spoolFailures = 0
                    }
                }
                if !claimed.isEmpty {
                    state.update { s in
                        for batch in claimed {
                            for record in batch.records { s.inFlight[record.id] = record.identifier ?? record.id }
                            s.requests += 1
                            s.jobs.append(Job(batch: batch, settings: s.settings, probe: !s.health.isHealthy))
                        }
                        // There may be more due work than capacity: look again as soon as there is room.
                        if claimed.count == capacity { s.wakeRequested = true }
                    }
                    continue
                }
                // Nothing claimable: learn when the next identifier's head will be due (one scan of the pending
                // rows, only then). A scan waiting behind one of its identifier in flight is not counted: that
                // worker's completion wakes us. A head due now that the claim did not take (another process
                // leased it between the two queries) gets a short timer rather than a busy loop.
                let due = (try? ledger.nextDueTime(now: wallNow)) ?? nil
                dueAt = due.map { date in
                    let wait = date.timeIntervalSince(wallNow)
                    return wait > 0 ? now + min(wait, Spool.longestWait) : now + 0.5
                }
            case .sleep(let until):
                // A wake-up counts only once there is room to claim: with none (the backoff, every worker busy)
                // it stays set, and waiting on it alone would return at once, again and again. Room comes from a
                // worker finishing (which updates the state and so re-checks this) or the backoff's end (`until`).
                // A wake-up that brought an earlier end of the backoff (a worker's failure, just recorded) ends
                // this wait too, so the next one is set to it: nothing else would end a wait with no deadline.
                // Only a backoff still ahead counts: one that has passed stays in `notBefore` while the probe it
                // let through is in flight, and every commit's wake-up would then spin this loop until the probe
                // ends (a slow API's whole timeout).
                state.wait(until: until) { s in
                    guard !s.stopping else { return true }
                    guard s.wakeRequested else { return false }
                    let now = MonotonicClock.now()
                    if Forwarder.capacity(s, now: now) > 0 { return true }
                    return s.health.notBefore.map { $0 > now && $0 < until } ?? false
                }
            }
        }
        state.update { $0.coordinatorRunning = false }
    }

    /// How many more requests may be claimed now: up to twice the workers while healthy, so a worker never waits
    /// for the next claim transaction; while failing or paused one probe at a time, once the backoff is over.
    private static func capacity(_ s: State, now: Double) -> Int {
        if s.health.isHealthy { return 2 * s.settings.concurrency - s.requests }
        return s.health.isOpen(at: now) && s.requests == 0 ? 1 : 0
    }

    /// The spool refuses even our bookkeeping (disk full, I/O error): back off instead of retrying at once, and
    /// say so once, not once per attempt.
    private func spoolRefused(_ error: SpoolError, now: Double) {
        let delay = state.withLock { s in
            s.spoolFailures += 1
            if s.spoolFailures == 1 {
                logger.error("delivery: cannot use the spool; retrying with backoff", [("error", error.description)])
            }
            return Forwarder.spoolBackoff.ceiling(attempt: s.spoolFailures)
        }
        state.wait(until: now + delay) { $0.stopping }
        state.withLock { s in if !s.stopping { s.wakeRequested = true } }
    }

    // MARK: workers

    private func workerLoop(_ client: HTTPClient) {
        while true {
            var job: Job?
            var unsent: [String] = []
            state.wait { s in
                if s.stopping { return true }
                guard var next = s.jobs.first else { return false }
                if !next.probe, !s.health.isHealthy {
                    // Delivery failed (or paused) since this was claimed: only the backoff's probe goes now.
                    unsent = Forwarder.dropQueuedJobs(&s)
                    return true
                }
                s.jobs.removeFirst()
                next.sentAt = MonotonicClock.now()
                s.stats.attempts += next.batch.records.count
                job = next
                return true
            }
            if !unsent.isEmpty {
                for id in unsent { try? ledger.release(id: id) }
                wake()
                continue
            }
            guard let job else {
                state.update { $0.workersRunning -= 1 }
                return
            }
            let (changed, backlogDueAt) = deliver(job, client: client)
            if changed { healthChanged() }
            delivered()
            // Paused (a refused token, a redirect) or failing: the scans claimed but not yet sent stay unsent, for
            // nothing may go out during a pause (docs/contracts.md, "Outcomes") and only one probe at a time while
            // failing; they are released for the probe after it.
            let held = state.withLock { s -> [String] in
                s.health.isHealthy ? [] : Forwarder.dropQueuedJobs(&s)
            }
            for id in held { try? ledger.release(id: id) }
            // Recorded first, then the identifiers are freed: the next scan of each is claimed only once this
            // one's outcome is durable.
            let except = state.withLock { s in
                for record in job.batch.records { s.inFlight.removeValue(forKey: record.id) }
                s.requests -= 1
                return Set(s.inFlight.keys)
            }
            if let now = backlogDueAt { _ = try? ledger.makeBackoffDue(now: now, except: except) }
            wake()
        }
    }

    /// Takes every job not yet sent off the queue; returns their scans, to be released.
    private static func dropQueuedJobs(_ s: inout State) -> [String] {
        let ids = s.jobs.flatMap { $0.batch.records.map(\.id) }
        s.requests -= s.jobs.count
        s.jobs.removeAll()
        for id in ids { s.inFlight.removeValue(forKey: id) }
        return ids
    }

    /// Sends one request (a lone scan, or a batch) and records what its answer left on each scan, in one
    /// transaction. Returns whether health changed, and the time of the answer when it made the whole backlog due
    /// again (recovery).
    private func deliver(_ job: Job, client: HTTPClient) -> (healthChanged: Bool, backlogDueAt: Date?) {
        let (batch, settings) = (job.batch, job.settings)
        let delivery = Delivery(settings: settings, client: client)
        var changed = false
        var backlogDueAt: Date?
        /// Health follows the outcome (under the lock); the scan's record follows from it.
        func applied(_ outcome: DeliveryOutcome?, now: Date) -> AttemptRecord {
            let result = state.withLock {
                apply(outcome, settings: settings, sentAt: job.sentAt, now: now, to: &$0)
            }
            changed = changed || result.healthChanged
            if result.backlogDue { backlogDueAt = now }
            return Forwarder.attemptRecord(outcome, retryAt: result.time, now: now)
        }
        var records: [(id: String, record: AttemptRecord)]
        /// Told after the spool recorded them (a reader of the log finds the spool already changed).
        var told: [(DeliveryOutcome?, String)] = []
        var keepBatch = true
        let now: Date
        if batch.records.count == 1 {
            let outcome = delivery.attempt(batch.records[0])
            now = Date()
            records = [(batch.records[0].id, applied(outcome, now: now))]
            told = [(outcome, batch.records[0].id)]
            keepBatch = !Forwarder.isFinal(outcome)
        } else if let template = settings.batchTemplate {
            let answer = delivery.attempt(batch, template: template)
            now = Date()
            switch answer {
            case nil:  // cancelled at shutdown: not sent
                records = batch.records.map { ($0.id, .released) }
            case .whole(let outcome):
                let record = applied(outcome, now: now)
                records = batch.records.map { ($0.id, record) }
            case .each(let outcomes):
                keepBatch = false
                records = zip(batch.records, outcomes).map { scan, outcome in (scan.id, applied(outcome, now: now)) }
                told = zip(outcomes, batch.records.map(\.id)).map { ($0, $1) }
            case .refused(let reason):
                keepBatch = false
                records = batch.records.map { ($0.id, .released) }
                let first = state.update { s in
                    defer { s.batchesRefused = true }
                    return !s.batchesRefused
                }
                if first {
                    logger.warn(
                        "the API refused a batched request: sending one scan per request until a reload",
                        [("reason", reason)])
                }
            }
        } else {
            // The document changed under a reload and can no longer be batched: these go one by one.
            now = Date()
            keepBatch = false
            records = batch.records.map { ($0.id, .released) }
        }
        do {
            try ledger.recordAttempts(batch: batch.key, records, keepBatch: keepBatch, now: now)
        } catch {
            logger.error("delivery: cannot record the outcome", [("id", batch.key), ("error", error.description)])
        }
        for (outcome, id) in told { Forwarder.log(outcome, id: id, logger: logger) }
        return (changed, backlogDueAt)
    }

    /// Updates health from one outcome (under the lock); logs only when health changes. Returns the wall-clock
    /// time of the scan's next attempt (for a retry), whether the whole backlog is due again (recovery) and
    /// whether health changed.
    private func apply(
        _ outcome: DeliveryOutcome?, settings: APISettings, sentAt: Double, now: Date, to s: inout State
    ) -> (
        time: Date?, backlogDue: Bool, healthChanged: Bool
    ) {
        guard let outcome else { return (nil, false, false) }
        let clock = MonotonicClock.now()
        switch outcome {
        case .delivered, .dead:
            if case .delivered = outcome { s.stats.delivered += 1 } else { s.stats.dead += 1 }
            guard case .resumed(let downFor, let failedAttempts, let afterPause)? = s.health.succeeded(clock: clock)
            else { return (nil, false, false) }
            if afterPause {
                logger.info("delivery resumed: the API accepts the requests again")
            } else {
                logger.info(
                    "delivery resumed: the API answers again",
                    [("downFor", String(format: "%.1fs", downFor)), ("failedAttempts", String(failedAttempts))])
            }
            return (nil, true, true)
        case .retry(let reason, let retryAfter):
            s.stats.failures += 1
            let (delay, change) = s.health.failed(
                reason: reason, retryAfter: retryAfter, now: now, clock: clock, random: Double.random(in: 0...1),
                sentAt: sentAt)
            if change != nil {
                logger.warn(
                    "delivery failing: scans stay pending and are retried with backoff",
                    [("reason", reason), ("url", settings.url)])
            }
            return (now.addingTimeInterval(delay), false, change != nil)
        case .authPaused(let reason), .redirected(let reason):
            s.stats.failures += 1
            guard s.health.pause(reason: reason, now: now, clock: clock) != nil else { return (nil, false, false) }
            if case .redirected = outcome {
                logger.error(
                    "delivery paused: api.url redirects and redirects are not followed (the token would go "
                        + "elsewhere); fix api.url and send SIGHUP (retrying in 5 min)",
                    [("reason", reason), ("url", settings.url)])
            } else {
                logger.error(
                    "delivery paused: the API refused the token; fix it and send SIGHUP (retrying in 5 min)",
                    [("reason", reason)])
            }
            return (nil, false, true)
        }
    }

    /// Sends one claimed scan and records the outcome: `scan`'s single attempt (`deliverOnce`), recorded as a
    /// worker records it. `retryAt` answers, for the outcome and the time it came, when a retry is due.
    @discardableResult
    static func send(
        _ record: ScanRecord, settings: APISettings, client: HTTPClient, ledger: DeliveryLedger, logger: Logger,
        retryAt: (DeliveryOutcome?, Date) -> Date?
    ) -> DeliveryOutcome? {
        let outcome = Delivery(settings: settings, client: client).attempt(record)
        let now = Date()
        do {
            try ledger.recordAttempts(
                batch: record.id, [(record.id, attemptRecord(outcome, retryAt: retryAt(outcome, now), now: now))],
                keepBatch: !isFinal(outcome), now: now)
        } catch {
            logger.error("delivery: cannot record the outcome", [("id", record.id), ("error", error.description)])
        }
        log(outcome, id: record.id, logger: logger)
        return outcome
    }

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
    /// identifier is pending, sent and recorded exactly as a worker does, a retry due after the first backoff.
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
        let outcome = send(record, settings: settings, client: client, ledger: ledger, logger: logger) { outcome, now in
            guard case .retry(_, let retryAfter)? = outcome else { return nil }
            return now.addingTimeInterval(
                backoff.delay(attempt: 0, retryAfter: retryAfter, random: Double.random(in: 0...1)))
        }
        return .sent(outcome)
    }

    /// Delivered or dead: the scan is done. Anything else leaves a lone scan to go alone again under its own key
    /// (an answer may have been lost), never inside a batch under another.
    static func isFinal(_ outcome: DeliveryOutcome?) -> Bool {
        switch outcome {
        case .delivered?, .dead?: return true
        default: return false
        }
    }

    /// What an outcome leaves on its scan (docs/contracts.md, "Outcomes"). A nil outcome (cancelled at
    /// shutdown) releases the scan.
    static func attemptRecord(_ outcome: DeliveryOutcome?, retryAt: Date?, now: Date) -> AttemptRecord {
        switch outcome {
        case nil: return .released
        case .delivered(let response)?: return .outcome(.delivered(response: response))
        case .dead(let reason, let response)?: return .outcome(.dead(reason: reason, response: response))
        case .retry(let reason, _)?: return .outcome(.retry(reason: reason, nextAttempt: retryAt ?? now))
        case .authPaused(let reason)?, .redirected(let reason)?: return .paused(reason: reason)
        }
    }

    /// One line per delivered (debug) or dead (warning) scan; failures and pauses are told once per change of
    /// health instead.
    static func log(_ outcome: DeliveryOutcome?, id: String, logger: Logger) {
        switch outcome {
        case .delivered?: logger.debug("scan delivered", [("id", id)])
        case .dead(let reason, _)?:
            logger.warn(
                "scan refused by the API: kept as dead (spool retry revives it)", [("id", id), ("reason", reason)])
        default: break
        }
    }
}
