import Platform

/// Lets another thread end a long piece of spool work, the whole-file check (`Spool.check(stop:)`) or the retention
/// purge (`purgeDelivered(stop:)`): a service's stop must not wait for either on a busy box (the check runs at the
/// lowest priority; the purge follows a drain's deliveries). Once stopped, later work ends at once too.
///
/// The purge looks between its batches. The check is interrupted, in two ways because SQLite 3.40's quick check is
/// one virtual-machine instruction: `stop` interrupts it while it runs (`sqlite3_interrupt`, safe from another thread while the connection is open: it is registered under this
/// lock and deregistered before it closes), and a progress handler on every instruction ends a check the interrupt
/// came too early for (SQLite forgets an interrupt that comes before a statement's first step).
public final class SpoolWorkStop: Sendable {
    private let state = Mutex<(stopped: Bool, running: SQLiteConnection?)>((false, nil))

    public init() {}

    /// Ends the running work and all later work; a check ended so gives no verdict.
    public func stop() {
        state.withLock { s in
            s.stopped = true
            s.running?.interrupt()
        }
    }

    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Runs `body` with `db` registered for `stop`.
    func running<T>(_ db: SQLiteConnection, _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        db.endStatements(once: self)
        state.withLock { $0.running = db }
        defer { state.withLock { $0.running = nil } }
        return try body()
    }
}
