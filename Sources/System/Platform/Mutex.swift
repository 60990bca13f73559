import Glibc

/// A value behind a pthread mutex, with the standard library's `Mutex` API (`withLock`).
///
/// Why not `Synchronization.Mutex`: on Linux its futex and atomics live in the uninstrumented standard library,
/// so ThreadSanitizer cannot see it synchronise and reports every access it guards as a race (checked with a
/// two-thread counter built with -sanitize=thread). A pthread mutex is intercepted by TSan, so the suite can run
/// clean under it and a real race still shows. Files that import `Platform` instead of `Synchronization` get
/// this type under the same name.
public final class Mutex<Value> {
    // Sendable where the value is (below): `value` is only reached inside `withLock`, while `mutex` is held; the
    // pthread mutex is allocated once, never moved, and used only through pthread calls.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ initial: Value) {
        value = initial
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

// @unchecked: the lock makes every access to `value` exclusive; a non-Sendable value stays confined, as in the
// standard library's `Mutex`.
extension Mutex: @unchecked Sendable where Value: Sendable {}
