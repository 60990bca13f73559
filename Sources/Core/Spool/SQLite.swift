import CSQLite
import Glibc
import Platform

/// An SQLite failure: the call, SQLite's result code and message.
public struct SQLiteError: Error, CustomStringConvertible, Equatable {
    public let code: Int32
    public let message: String
    public let context: String

    public var description: String { "\(context): \(message) (SQLite code \(code))" }

    /// The disk (or the configured page limit) is full: the write was refused, nothing was committed.
    public var isFull: Bool { code & 0xFF == SQLITE_FULL }
    /// Another connection holds the lock longer than the busy timeout.
    public var isBusy: Bool { code & 0xFF == SQLITE_BUSY || code & 0xFF == SQLITE_LOCKED }
    /// `interrupt` ended the statement (a stop): no verdict on the file.
    public var isInterrupt: Bool { code & 0xFF == SQLITE_INTERRUPT }
}

/// SQLite's "copy this string now" destructor, a C macro Swift cannot import.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not thread-safe by itself: it is only ever used under `Spool`'s mutex, which is
/// why it may be marked Sendable (the mutex, not the type, provides the exclusion).
final class SQLiteConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    /// - Parameter readOnly: open without write access and never create (inspection commands: the file is
    ///   left exactly as it was).
    init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        var db: OpaquePointer?
        // NOMUTEX: we serialise ourselves; FULLMUTEX would only add a second lock.
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: rc, message: message, context: "open \(path)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Ends the statement running on this connection at its next step (SQLite allows it from any thread while the
    /// connection is open).
    func interrupt() { sqlite3_interrupt(handle) }

    /// Ends each statement on this connection at its next instruction once `stop` is stopped (SQLite's progress
    /// handler; its answer 1 interrupts). `stop` must outlive the connection's use.
    func endStatements(once stop: SpoolWorkStop) {
        sqlite3_progress_handler(
            handle, 1,
            { context in
                guard let context else { return 0 }
                return Unmanaged<SpoolWorkStop>.fromOpaque(context).takeUnretainedValue().isStopped ? 1 : 0
            }, Unmanaged.passUnretained(stop).toOpaque())
    }

    func error(_ rc: Int32, _ context: String) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)), context: context)
    }

    /// Keeps the WAL file, at its size, when the last connection closes (SQLite deletes it by default).
    /// Why: an fsync after appending to a file must also journal the file's new size, ~3x the cost of an
    /// fsync after overwriting allocated blocks (ext4, measured for docs/benchmarks.md). A WAL that stays
    /// allocated is rewritten in place after each checkpoint, so a restarted bridge's durable commits stay
    /// the cheap kind instead of growing a new WAL for its first ~1000 pages; and a full disk cannot refuse
    /// a commit that fits the WAL. The checkpoint on close still runs, so the database file is complete.
    func keepWALAllocated() {
        var on: Int32 = 1
        _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
    }

    /// Waits up to `Spool.busyTimeoutMilliseconds` for another connection's lock, retrying every millisecond. SQLite's own
    /// `busy_timeout` retries on a growing schedule (1, 2, 5 ... 100 ms apart), so a writer that frees the lock only
    /// briefly between batches (a purge in another process) can keep a waiting commit out for a second; retried
    /// each millisecond, the commit gets in at the first gap. Only while blocked: no cost otherwise.
    func waitWhileBusy() {
        sqlite3_busy_handler(
            handle,
            { _, count in
                guard count < Int32(Spool.busyTimeoutMilliseconds) else { return 0 }
                MonotonicClock.sleep(seconds: 0.001)
                return 1
            }, nil)
    }

    /// Truncates this database's WAL to zero bytes when it has grown past `limit` (a big transaction: a purge, a
    /// migration, a reader that held a snapshot through a burst). A persisted WAL keeps its high-water size, and
    /// every process that opens the database after the last one closed re-reads and re-checkpoints all of it;
    /// truncating it after the checkpoint means nobody pays for an old transaction. Best effort: while another
    /// connection reads, SQLite cannot truncate and the next call tries again. Returns whether it truncated.
    @discardableResult
    func truncateWAL(ifLargerThan limit: Int) -> Bool {
        var info = stat()
        guard let file = sqlite3_db_filename(handle, "main"), stat(String(cString: file) + "-wal", &info) == 0,
            Int(info.st_size) > limit
        else { return false }
        var logFrames: Int32 = 0
        var checkpointed: Int32 = 0
        return sqlite3_wal_checkpoint_v2(handle, "main", SQLITE_CHECKPOINT_TRUNCATE, &logFrames, &checkpointed)
            == SQLITE_OK
    }

    /// Runs SQL with no results (several statements allowed).
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(message)
            throw SQLiteError(code: rc, message: text, context: String(sql.prefix(60)))
        }
    }

    /// A cached prepared statement, reset and with its bindings cleared.
    func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            sqlite3_clear_bindings(cached)
            return Statement(handle: cached, connection: self)
        }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw error(rc, "prepare \(sql.prefix(60))") }
        statements[sql] = statement
        return Statement(handle: statement, connection: self)
    }

    /// Resets every cached statement. Called after each spool operation, so no statement left mid-result
    /// keeps a read transaction (and an old WAL snapshot) open between operations.
    func resetAll() {
        for statement in statements.values { sqlite3_reset(statement) }
    }

    var changes: Int { Int(sqlite3_changes(handle)) }

    /// A single integer from a query such as `PRAGMA user_version`.
    func scalarInt(_ sql: String) throws(SQLiteError) -> Int? {
        let statement = try prepare(sql)
        // Reset before returning: a statement left mid-result keeps a read transaction open, and a later
        // BEGIN IMMEDIATE on this connection then fails with "database is locked" without waiting.
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.isNull(0) ? nil : statement.int(0)
    }

    /// Runs `body` in a transaction (`BEGIN IMMEDIATE`, so the write lock is taken up front and a busy
    /// conflict shows at BEGIN rather than half-way); rolls back when it throws.
    func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

/// A prepared statement borrowed from the connection's cache.
struct Statement {
    let handle: OpaquePointer
    unowned let connection: SQLiteConnection

    func bind(_ index: Int32, _ value: String?) throws(SQLiteError) {
        let rc: Int32
        if let value {
            // With the byte count, not -1: a NUL inside a read is stored, not a silent end of the text.
            var text = value
            rc = text.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { chars in
                    // An empty buffer may have no address; a nil pointer would bind NULL, not "".
                    guard let base = chars.baseAddress else {
                        return sqlite3_bind_text(handle, index, "", 0, transient)
                    }
                    return sqlite3_bind_text64(
                        handle, index, base, sqlite3_uint64(chars.count), transient, UInt8(SQLITE_UTF8))
                }
            }
        } else {
            rc = sqlite3_bind_null(handle, index)
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    func bind(_ index: Int32, _ value: Int) throws(SQLiteError) {
        let rc = sqlite3_bind_int64(handle, index, Int64(value))
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    func bind(_ index: Int32, integer value: Int?) throws(SQLiteError) {
        guard let value else {
            let rc = sqlite3_bind_null(handle, index)
            guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
            return
        }
        try bind(index, value as Int)
    }

    func bind(_ index: Int32, real value: Double?) throws(SQLiteError) {
        let rc = value.map { sqlite3_bind_double(handle, index, $0) } ?? sqlite3_bind_null(handle, index)
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    /// Steps once: true when a row is available, false when done.
    @discardableResult
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return false
        default:
            let error = connection.error(rc, "step")
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Ends the statement's current execution (and the read transaction it holds).
    func reset() { sqlite3_reset(handle) }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }

    func double(_ column: Int32) -> Double? {
        isNull(column) ? nil : sqlite3_column_double(handle, column)
    }

    func string(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }
}

/// The linked SQLite library's version, for `plings-bridge version`.
public var sqliteLibraryVersion: String { String(cString: sqlite3_libversion()) }
