import Glibc

/// State guarded by one mutex, with a condition variable whose timed waits run on `MonotonicClock`.
///
/// Foundation's `NSCondition.wait(until:)` takes a `Date`, i.e. a `CLOCK_REALTIME` deadline: a wall-clock step
/// back by months during the wait makes it wait months. Here the condition variable is created with
/// `pthread_condattr_setclock(CLOCK_MONOTONIC)`.
///
/// The state is reachable only inside `withLock` and inside a wait's predicate, each a short exclusive access
/// made while the mutex is held; a wait never holds an access to the state while it sleeps, so a thread that
/// changes the state during another's wait never overlaps it (Swift's exclusivity rule holds).
public final class Monitor<State> {
    // Sendable where the state is (below): `state` is read and written only while `mutex` is held (withLock,
    // wait's predicate), and the pthread objects are allocated once, never moved, and used only through pthread
    // calls.
    private var state: State
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init(_ initial: State) {
        state = initial
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state.
    public func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Changes the state and wakes every waiter, so each re-checks its predicate.
    public func update<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&state)
    }

    /// Sleeps until `predicate` holds (checked under the lock at once and after every wake-up) or the monotonic
    /// `deadline` (seconds of `MonotonicClock`; nil or infinity: no deadline) passes. Returns whether the predicate
    /// held.
    /// A watched worker counts as waiting meanwhile (`WorkerActivity`).
    @discardableResult
    public func wait(until deadline: Double? = nil, for predicate: (inout State) -> Bool) -> Bool {
        WorkerActivity.waiting { waitLocked(until: deadline, for: predicate) }
    }

    private func waitLocked(until deadline: Double?, for predicate: (inout State) -> Bool) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if predicate(&state) { return true }
            guard let deadline, deadline.isFinite else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            let remaining = deadline - MonotonicClock.now()
            if remaining <= 0 { return false }
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            let whole = remaining.rounded(.down)
            var nanoseconds = Int(ts.tv_nsec) + Int((remaining - whole) * 1e9)
            var seconds = Int(ts.tv_sec) + Int(min(whole, 1e9))
            if nanoseconds >= 1_000_000_000 {
                seconds += 1
                nanoseconds -= 1_000_000_000
            }
            ts.tv_sec = seconds
            ts.tv_nsec = nanoseconds
            _ = pthread_cond_timedwait(condition, mutex, &ts)
        }
    }
}

// @unchecked: the lock makes every access to the state exclusive; a non-Sendable state stays confined.
extension Monitor: @unchecked Sendable where State: Sendable {}
