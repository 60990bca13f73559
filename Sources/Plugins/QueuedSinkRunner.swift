import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What a queue sink's transport says one attempt's answer means for the scans it sent together.
public enum QueuedDelivery: Sendable, Equatable {
    /// Taken.
    case delivered
    /// Refused for good (no retry can change it). A batch of several is not dead-lettered as a whole: its scans are
    /// sent again one by one, and only the one refused alone is dead.
    case dead(reason: String)
    /// Not taken for a reason that may pass; `retryAfter` seconds when the other side asked for a wait.
    case retry(reason: String, retryAfter: Double?)
    /// A refusal only a person can fix (a refused token, a redirect): delivery pauses until a reload or the pause
    /// ends; the attempt is not counted.
    case paused(reason: String)
    /// Not sent: `cancel()` abandoned it (shutdown). The scans stay pending, nothing is counted.
    case abandoned
}

/// A queue sink's transport: sends one batch and says what the answer means. Only the runner's thread calls
/// `deliver`; `cancel` may come from any thread.
public protocol QueuedSinkTransport: Sendable {
    /// Sends `batch` (one or more scans, in capture order); blocks until an answer or the transport's timeout.
    func deliver(_ batch: [SinkItem]) -> QueuedDelivery
    /// Abandons the attempt in progress and every later one (shutdown).
    func cancel()
}

/// Runs a sink that delivers from its own spool queue (a webhook): one thread that claims the oldest pending scans
/// (leased, in capture order), hands each batch to the transport, records what the answer meant, and keeps the
/// sink's health (`SinkHealth`: backoff with jitter after a failure, a pause after a refusal only a person can fix).
/// Everything a new sink would otherwise copy lives here, so a sink is its configuration and its transport.
///
/// It sleeps until a scan is committed (`wake`) or its backoff or pause ends; nothing else wakes it. A failure to
/// record an outcome (a full disk) is retried every second, logged once; claims that fail back off up to 30 s.
/// Delivery is at least once: a scan whose answer was lost, or whose outcome could not be recorded before the
/// process ended, is sent again.
public final class QueuedSinkRunner: Service {
    public struct Options: Sendable, Equatable {
        /// Scans per attempt.
        public var batchSize: Int
        /// How long a claimed scan is reserved: the transport's timeout plus a margin.
        public var lease: Double

        public init(batchSize: Int, lease: Double) {
            self.batchSize = max(1, batchSize)
            self.lease = lease
        }
    }

    /// Counters in scans, since start.
    public typealias Stats = DeliveryStats

    private struct State {
        var stopping = false
        var wakeRequested = true
        /// Bumped by every wake-up and stop, so a wait knows something happened.
        var ticks = 0
        var health: SinkHealth
        var stats = Stats()
        /// A batch was refused for good: scans go one per attempt up to this capture position, so only the one
        /// refused is dead-lettered.
        var singlyThrough: Int?
        /// The size of a batch sent without a final answer (a failure, a pause, an answer lost): the next claim
        /// takes that many, the same scans at the head of the queue, so the repeat carries the same
        /// Idempotency-Key even when newer scans were committed meanwhile (docs/contracts.md, "Webhook request").
        var repeatSize: Int?
        /// Consecutive claim failures (the spool's), for their backoff.
        var claimFailures = 0
        /// The monotonic time the earliest lease on the queue ends (a claim by a process that died): the queue is
        /// looked at again then.
        var leaseEnds: Double?
    }

    public let name: String
    private let spool: Spool
    private let logger: Logger
    private let transport: any QueuedSinkTransport
    private let options: Options
    private let state: Monitor<State>
    private let worker = WorkerThreads()
    private let healthChanged: @Sendable () -> Void
    private let delivered: @Sendable () -> Void
    /// Jitter in 0...1 (injected by tests).
    private let random: @Sendable () -> Double

    /// The backoff after failed attempts (1 s doubling to 5 min, full jitter), as the API's.
    public static let backoff = Backoff(base: 1, cap: 300)
    /// How long a pause lasts before one attempt is tried again (a reload ends it sooner).
    public static let pauseDuration: Double = 300
    static let spoolBackoff = Backoff(base: 0.5, cap: 30)

    /// `name` is the sink's queue in the spool and its name in logs ("webhook").
    public init(
        name: String, spool: Spool, transport: any QueuedSinkTransport, options: Options, logger: Logger,
        healthChanged: @escaping @Sendable () -> Void = {}, delivered: @escaping @Sendable () -> Void = {},
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.name = name
        self.spool = spool
        self.transport = transport
        self.options = options
        self.logger = logger
        self.healthChanged = healthChanged
        self.delivered = delivered
        self.random = random
        state = Monitor(
            State(health: SinkHealth(backoff: QueuedSinkRunner.backoff, pauseDuration: QueuedSinkRunner.pauseDuration)))
    }

    public var currentHealth: SinkHealth.State { state.withLock { $0.health.state } }
    public var currentStats: Stats { state.withLock { $0.stats } }

    public func start() {
        worker.start(name: name, watched: true) { [self] in run() }
    }

    /// Scans were committed: look at the queue again.
    public func wake() {
        state.update {
            $0.wakeRequested = true
            $0.ticks += 1
        }
    }

    /// A reload with unchanged settings: a pause or a backoff ends at once (the next attempt goes now).
    public func resume() {
        let (resumed, retrying) = state.update { s in
            s.wakeRequested = true
            s.ticks += 1
            let retrying = s.health.endBackoff(clock: MonotonicClock.now())
            return (s.health.endPause(), retrying)
        }
        if resumed {
            logger.info("\(name): delivery resumed: configuration reloaded")
            healthChanged()
        } else if retrying {
            logger.info("\(name): configuration reloaded; trying again now")
        }
    }

    /// An attempt in flight is abandoned at once (its scans stay pending); returns when the thread ended or by
    /// `deadline`.
    public func stop(deadline: Double) {
        worker.expectEnd()
        state.update {
            $0.stopping = true
            $0.ticks += 1
        }
        transport.cancel()
        worker.join(until: deadline)
    }

    private enum Step {
        case claim(limit: Int)
        case wait(until: Double, ticks: Int)
        case stop
    }

    private func run() {
        while true {
            let clock = MonotonicClock.now()
            let step: Step = state.withLock { s in
                if s.stopping { return .stop }
                if s.health.isPaused, s.health.isOpen(at: clock) {
                    // The pause is over: one attempt decides whether it is lifted.
                    s.health.endPause(to: .starting)
                    s.wakeRequested = true
                }
                if !s.health.isOpen(at: clock) { return .wait(until: s.health.notBefore ?? clock, ticks: s.ticks) }
                if let end = s.leaseEnds, clock >= end {
                    s.leaseEnds = nil
                    s.wakeRequested = true
                }
                guard s.wakeRequested else { return .wait(until: s.leaseEnds ?? .infinity, ticks: s.ticks) }
                s.wakeRequested = false
                return .claim(limit: min(s.singlyThrough == nil ? options.batchSize : 1, s.repeatSize ?? .max))
            }
            switch step {
            case .stop:
                return
            case .wait(let until, let ticks):
                state.wait(until: until) { $0.stopping || $0.ticks != ticks }
            case .claim(let limit):
                let batch: [SinkItem]
                do {
                    batch = try spool.claimForSink(name, now: Date(), lease: options.lease, limit: limit)
                    state.withLock { $0.claimFailures = 0 }
                } catch {
                    claimFailed(error)
                    continue
                }
                if batch.count < limit { noteLeases() }
                guard !batch.isEmpty else { continue }
                attempt(batch)
            }
        }
    }

    /// Sends one batch and records what its answer meant.
    private func attempt(_ batch: [SinkItem]) {
        let outcome = transport.deliver(batch)
        let clock = MonotonicClock.now()
        let now = Date()
        let seqs = batch.map(\.seq)
        let (recorded, change): (SinkAttempt, SinkHealth.Change?) = state.update { s in
            s.wakeRequested = true
            switch outcome {
            case .delivered, .dead: s.repeatSize = nil
            case .retry, .paused, .abandoned: s.repeatSize = batch.count
            }
            switch outcome {
            case .delivered:
                s.stats.attempts += batch.count
                s.stats.delivered += batch.count
                if let through = s.singlyThrough, let last = seqs.last, last >= through { s.singlyThrough = nil }
                return (.delivered, s.health.succeeded(clock: clock))
            case .dead where batch.count > 1:
                // Which of them was refused is not known: each goes alone, and only that one is dead-lettered.
                s.singlyThrough = seqs.last
                return (.released, nil)
            case .dead(let reason):
                s.stats.attempts += 1
                s.stats.dead += 1
                if let through = s.singlyThrough, let last = seqs.last, last >= through { s.singlyThrough = nil }
                // The other side answered: the sink itself works.
                return (.dead(reason: reason), s.health.succeeded(clock: clock))
            case .retry(let reason, let retryAfter):
                s.stats.attempts += batch.count
                s.stats.failures += batch.count
                let (_, change) = s.health.failed(
                    reason: reason, retryAfter: retryAfter, now: now, clock: clock, random: random())
                return (.retry(reason: reason), change)
            case .paused(let reason):
                return (.paused(reason: reason), s.health.pause(reason: reason, now: now, clock: clock))
            case .abandoned:
                return (.abandoned, nil)
            }
        }
        if case .dead(let reason) = outcome {
            if batch.count > 1 {
                logger.warn(
                    "\(name): a batch was refused; its scans go one by one",
                    [("scans", String(batch.count)), ("reason", reason)])
            } else {
                logger.error(
                    "\(name): scan refused for good; kept in the spool as refused",
                    [("scan", batch[0].record.id), ("reason", reason)])
            }
        }
        log(change)
        record(recorded, seqs: seqs, now: now)
        if change != nil { healthChanged() }
    }

    /// Writes the outcome; a spool that refuses (a full disk) is asked again every second until it takes it or the
    /// runner stops (the scans then stay pending and are sent again: at least once).
    private func record(_ attempt: SinkAttempt, seqs: [Int], now: Date) {
        var failing = false
        while true {
            do {
                try spool.recordSinkAttempt(name, seqs: seqs, attempt, now: now)
                if failing { logger.info("\(name): outcomes are recorded again") }
                if attempt != .released, attempt != .abandoned { delivered() }
                return
            } catch {
                if !failing {
                    failing = true
                    logger.error("\(name): cannot record an outcome; retrying", [("error", error.description)])
                }
                if state.wait(until: MonotonicClock.deadline(after: 1), for: { $0.stopping }) { return }
            }
        }
    }

    /// The queue had fewer due scans than asked for: the rest are leased. When the earliest lease ends (by the
    /// wall clock, as the spool keeps it), the queue is looked at again, or a scan a dead process claimed would
    /// wait for the next commit.
    private func noteLeases() {
        guard let end = try? spool.nextLeaseEnd(forSink: name) else {
            state.withLock { $0.leaseEnds = nil }
            return
        }
        // A lease never lasts longer than `Spool.longestWait` (a wall clock stepped back claims it at once).
        let wait = min(max(0, end.timeIntervalSinceNow), Spool.longestWait) + 0.01
        state.withLock { $0.leaseEnds = MonotonicClock.now() + wait }
    }

    private func claimFailed(_ error: SpoolError) {
        let (delay, first) = state.withLock { s -> (Double, Bool) in
            s.claimFailures += 1
            s.wakeRequested = true
            return (
                QueuedSinkRunner.spoolBackoff.delay(attempt: s.claimFailures - 1, random: 0.75 + 0.25 * random()),
                s.claimFailures == 1
            )
        }
        if first { logger.error("\(name): cannot read the spool; retrying", [("error", error.description)]) }
        state.wait(until: MonotonicClock.deadline(after: delay)) { $0.stopping }
    }

    private func log(_ change: SinkHealth.Change?) {
        switch change {
        case nil: break
        case .startedFailing(let reason)?:
            logger.warn("\(name): delivery failing; scans stay queued and are retried", [("reason", reason)])
        case .resumed(let downFor, let failedAttempts, let afterPause)?:
            logger.info(
                afterPause ? "\(name): delivery resumed after the pause" : "\(name): delivery resumed",
                [("downSeconds", String(format: "%.1f", downFor)), ("failedAttempts", String(failedAttempts))])
        case .paused(let reason)?:
            logger.error(
                "\(name): delivery paused until a reload or for \(Int(QueuedSinkRunner.pauseDuration / 60)) min",
                [("reason", reason)])
        }
    }
}
