import Glibc

/// Whether a watched worker is waiting for work or working, and since when: what the watchdog reads to tell a
/// worker hung in a blocking call (a request that never returns, a lock never released) from one that waits for
/// work, without waking either (an idle loop stays asleep). A worker waits while it is inside `Monitor.wait` or
/// `WorkerActivity.waiting { }` (around a `poll()` or a library's event loop) and works otherwise; one that has
/// worked for longer than its limit without passing through a wait is stuck.
public final class WorkerActivity: Sendable {
    public let name: String
    /// The longest a unit of its work may take (seconds).
    public let limit: Double
    private let state: Mutex<(waits: Int, since: Double)>

    init(name: String, limit: Double) {
        self.name = name
        self.limit = limit
        state = Mutex((0, MonotonicClock.now()))
    }

    /// For how long it has been working at `now`; nil while it waits.
    func working(at now: Double) -> Double? {
        state.withLock { $0.waits > 0 ? nil : now - $0.since }
    }

    private func beginWait() { state.withLock { $0.waits += 1 } }

    private func endWait() {
        state.withLock { s in
            s.waits -= 1
            if s.waits == 0 { s.since = MonotonicClock.now() }
        }
    }

    // MARK: - The watched workers, and this thread's

    private static let watched = Mutex<[WorkerActivity]>([])
    /// The key of the thread-specific pointer to the running worker's activity (none on other threads).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Watches the worker about to run on this thread until `end()`.
    static func begin(name: String, limit: Double) -> WorkerActivity {
        let activity = WorkerActivity(name: name, limit: limit)
        watched.withLock { $0.append(activity) }
        pthread_setspecific(key, Unmanaged.passUnretained(activity).toOpaque())
        return activity
    }

    /// The worker's body returned: it is no longer watched.
    func end() {
        pthread_setspecific(WorkerActivity.key, nil)
        WorkerActivity.watched.withLock { all in all.removeAll { $0 === self } }
    }

    /// The watched worker running on this thread, if any (held by `watched` while it runs).
    static var current: WorkerActivity? {
        pthread_getspecific(key).map { Unmanaged<WorkerActivity>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body`, a wait for work (a `poll()`, a library's event loop bounded by its own timeout), with this
    /// thread's worker marked as waiting. On a thread that is not a watched worker it just runs `body`.
    public static func waiting<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let activity = current else { return try body() }
        activity.beginWait()
        defer { activity.endWait() }
        return try body()
    }

    /// The watched workers that have worked for longer than their limit at `now` (monotonic seconds), with how long.
    public static func stuck(now: Double) -> [(name: String, working: Double)] {
        watched.withLock { $0 }.compactMap { activity in
            guard let working = activity.working(at: now), working > activity.limit else { return nil }
            return (activity.name, working)
        }
    }
}
