import Foundation

/// A sink's delivery health, the one model every sink shares: whether it delivers, since when it has been failing
/// and why, or until when it is paused (a refusal only a person can fix: a bad token, a broker's ACL), and so when
/// the next attempt may come. Pure: the caller passes the times in, keeps it under its own lock, and logs the
/// `Change` it returns outside that lock, so a problem is logged once when it starts and once when it ends, never
/// once per attempt.
///
/// Times: `Date` for what people read (`since`, `until`), monotonic seconds (`MonotonicClock`) for every wait.
public struct SinkHealth: Sendable {
    public enum State: Sendable, Equatable {
        /// Not yet known (a broker not yet connected).
        case starting
        case healthy
        case failing(reason: String, since: Date)
        case paused(reason: String, until: Date)
    }

    /// A change worth one log line (and a fresh `status`).
    public enum Change: Sendable, Equatable {
        case startedFailing(reason: String)
        /// Healthy again after failing for `downFor` seconds (`failedAttempts` in a row), or after a pause.
        case resumed(downFor: Double, failedAttempts: Int, afterPause: Bool)
        case paused(reason: String)
    }

    public private(set) var state: State
    /// Failures since the last success: the backoff's exponent.
    public private(set) var consecutiveFailures = 0
    /// The monotonic time before which no attempt is made (the backoff's or the pause's end); nil: any time.
    public private(set) var notBefore: Double?
    /// The monotonic time the current failing episode started.
    private var failingSince: Double = 0
    /// The monotonic time the last failure set the backoff: a request sent before it was already on its way
    /// and says nothing new about the other side (see `failed`).
    private var lastFailureAt: Double?
    public let backoff: Backoff
    public let pauseDuration: Double

    public init(backoff: Backoff, pauseDuration: Double, initial: State = .healthy) {
        self.backoff = backoff
        self.pauseDuration = pauseDuration
        self.state = initial
    }

    /// True unless a backoff or a pause is running at monotonic time `clock`.
    public func isOpen(at clock: Double) -> Bool { notBefore.map { clock >= $0 } ?? true }

    public var isHealthy: Bool { state == .healthy }

    public var isPaused: Bool {
        if case .paused = state { return true }
        return false
    }

    /// The problem in force, for `status` and `spool stats`.
    public var reason: String? {
        switch state {
        case .starting, .healthy: return nil
        case .failing(let reason, _), .paused(let reason, _): return reason
        }
    }

    /// A delivery worked.
    public mutating func succeeded(clock: Double) -> Change? {
        let change: Change?
        switch state {
        case .starting, .healthy: change = nil
        case .failing:
            change = .resumed(downFor: clock - failingSince, failedAttempts: consecutiveFailures, afterPause: false)
        case .paused: change = .resumed(downFor: 0, failedAttempts: consecutiveFailures, afterPause: true)
        }
        state = .healthy
        consecutiveFailures = 0
        notBefore = nil
        lastFailureAt = nil
        return change
    }

    /// A delivery failed for a reason that may pass: `noteFailure`, then `scheduleRetry`. `sentAt` (monotonic), for
    /// a sink with several requests in flight: one sent before the last failure was recorded failed in the same
    /// round, so it keeps the wait in force (a `retryAfter` may lengthen it) instead of doubling it again. The
    /// backoff's exponent counts probes, not requests: four requests that fail together are one failure, and a
    /// short outage never earns a wait of minutes.
    public mutating func failed(
        reason: String, retryAfter: Double? = nil, now: Date, clock: Double, random: Double, sentAt: Double? = nil
    ) -> (delay: Double, change: Change?) {
        if isPaused, !isOpen(at: clock) { return (notBefore.map { $0 - clock } ?? 0, nil) }
        if case .failing = state, let sentAt, let last = lastFailureAt, sentAt < last {
            let asked = retryAfter.map { clock + min($0, Backoff.maximumRetryAfter) } ?? clock
            notBefore = max(notBefore ?? clock, asked)
            return (notBefore.map { $0 - clock } ?? 0, nil)
        }
        let change = noteFailure(reason: reason, now: now, clock: clock)
        return (scheduleRetry(retryAfter: retryAfter, clock: clock, random: random), change)
    }

    /// Health turns to failing (a change, to log once) or stays failing. `keepFirstReason`: the status keeps the
    /// episode's first reason (the API's) or follows the latest (the broker's, whose later reasons say more). A
    /// failure while a pause runs (a connection that was already on its way) changes nothing.
    public mutating func noteFailure(reason: String, now: Date, clock: Double, keepFirstReason: Bool = true)
        -> Change?
    {
        switch state {
        case .paused where !isOpen(at: clock):
            return nil
        case .failing(let old, let since):
            state = .failing(reason: keepFirstReason ? old : reason, since: since)
            return nil
        case .starting, .healthy, .paused:
            state = .failing(reason: reason, since: now)
            failingSince = clock
            return .startedFailing(reason: reason)
        }
    }

    /// The wait before the next attempt, which it sets: the backoff's for this many failures in a row, jittered by
    /// `random` in 0...1 (full jitter; pass `0.75 + 0.25 * r` for a wait of at least 3/4 of it), and at least
    /// `retryAfter` when the other side asked for it.
    public mutating func scheduleRetry(retryAfter: Double? = nil, clock: Double, random: Double) -> Double {
        let delay = backoff.delay(attempt: consecutiveFailures, retryAfter: retryAfter, random: random)
        consecutiveFailures += 1
        notBefore = clock + delay
        lastFailureAt = clock
        return delay
    }

    /// A reload (the operator fixed something, or asks for another try): a backoff in force ends, so the next
    /// attempt goes now. The state and the exponent stay: a failure after it waits as long as it would have.
    /// True when a backoff was running.
    @discardableResult
    public mutating func endBackoff(clock: Double) -> Bool {
        guard case .failing = state, !isOpen(at: clock) else { return false }
        notBefore = nil
        return true
    }

    /// A refusal only a person can fix: no attempt for `pauseDuration` (a reload ends it sooner). Logged once.
    public mutating func pause(reason: String, now: Date, clock: Double) -> Change? {
        let wasPaused = isPaused
        state = .paused(reason: reason, until: now.addingTimeInterval(pauseDuration))
        notBefore = clock + pauseDuration
        return wasPaused ? nil : .paused(reason: reason)
    }

    /// The pause is over (its time ran out, or a reload): attempts may start again, from `state` (`starting`
    /// for a sink that must reconnect first). True when it was paused.
    @discardableResult
    public mutating func endPause(to next: State = .healthy) -> Bool {
        guard isPaused else { return false }
        state = next
        notBefore = nil
        return true
    }

    /// Clears the backoff's exponent (a connection that lasted: the next failure starts from the shortest wait).
    public mutating func forgiveFailures() { consecutiveFailures = 0 }

    /// The connection is back (a broker's CONNACK): healthy, and a change when it was not. The backoff's exponent
    /// stays: a connection that ends at once is a failure that must not restart the wait at its shortest
    /// (`forgiveFailures` once it has lasted).
    public mutating func connected(clock: Double) -> Change? {
        let failures = consecutiveFailures
        let change = succeeded(clock: clock)
        consecutiveFailures = failures
        return change
    }
}
