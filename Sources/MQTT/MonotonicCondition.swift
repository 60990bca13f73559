import Glibc

/// A mutex and condition variable whose timed waits run on `CLOCK_MONOTONIC` (seconds of `MonotonicClock`), for
/// the sink's two threads, which lock and unlock around blocking calls (Platform's `Monitor` is closure-shaped).
/// A wall-clock step during a wait changes nothing.
final class MonotonicCondition: @unchecked Sendable {
    // @unchecked Sendable: only pthread objects, allocated once, never moved, used only through pthread calls.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
    private let condition: UnsafeMutablePointer<pthread_cond_t> = .allocate(capacity: 1)

    init() {
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

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (the mutex held) until woken or the monotonic `deadline`; false when the deadline passed.
    @discardableResult
    func wait(until deadline: Double) -> Bool {
        var ts = timespec()
        let whole = deadline.rounded(.down)
        ts.tv_sec = Int(whole)
        ts.tv_nsec = Int((deadline - whole) * 1e9)
        return pthread_cond_timedwait(condition, mutex, &ts) == 0
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
