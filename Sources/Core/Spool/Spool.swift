import BridgeCore
import Foundation
import Platform

/// Why the spool could not do what was asked.
public enum SpoolError: Error, CustomStringConvertible {
    case sqlite(SQLiteError)
    case newerSchema(found: Int, supported: Int)
    /// Inspection found a spool the running service has not migrated yet (inspection never writes).
    case olderSchema(found: Int, supported: Int)
    /// Inspection was pointed at a file that is not a plings-bridge spool (it is left untouched).
    case notASpool(String)
    case cannotCreateDirectory(String, String)
    case cannotSyncDirectory(String, String)

    public var description: String {
        switch self {
        case .sqlite(let e): return e.isFull ? "spool disk is full: \(e)" : "spool: \(e)"
        case .newerSchema(let found, let supported):
            return
                "spool schema version \(found) is newer than this build supports (\(supported)); upgrade plings-bridge"
        case .olderSchema(let found, let supported):
            return "spool schema version \(found) is older than this build's (\(supported)); start the service once "
                + "(it migrates the spool), then inspect it"
        case .notASpool(let path):
            return "\(path) is not a plings-bridge spool (no scans table); it was left untouched"
        case .cannotCreateDirectory(let path, let why): return "cannot create spool directory \(path): \(why)"
        case .cannotSyncDirectory(let path, let why): return "cannot fsync spool directory \(path): \(why)"
        }
    }

    /// True when the disk (or page limit) is full: the write was refused and nothing was half-written.
    public var isDiskFull: Bool {
        if case .sqlite(let e) = self { return e.isFull }
        return false
    }
}

/// The durable local store of every accepted scan (docs/contracts.md, "Spool record"): SQLite in WAL mode,
/// `synchronous=FULL` by default, shared safely by several processes (a running service and CLI commands).
///
/// All calls are short synchronous transactions, serialised by a mutex: SQLite connections are not
/// thread-safe, and a lock held for one commit is simpler and faster than hopping to an actor. Callers on the
/// read path (the pipeline's own thread) may block for one fsync.
public final class Spool: Sendable {
    public let path: String
    let connection: Mutex<SQLiteConnection>
    /// A second connection for delivery bookkeeping (claims, outcomes) with `synchronous=NORMAL`: in WAL mode
    /// its commits are atomic but not fsynced one by one. Losing the last few on power loss only means a
    /// scan is sent again with the same idempotency key, which delivery allows (at-least-once); it halves
    /// the fsyncs per delivered scan. Accepting a scan and operator actions stay on the FULL connection.
    let bookkeeping: Mutex<SQLiteConnection>
    /// False for an inspecting open (`openIfExists`): it never writes, so it never moves a damaged file aside.
    let writable: Bool
    let synchronous: BridgeConfig.Synchronous
    /// The file both connections have open. Another process that moves a damaged spool aside puts a new file
    /// at `path`: every operation first checks the path still names this one (`Spool+Damage.swift`).
    let identity: Mutex<FileIdentity?>
    /// Told once for each damaged file this spool moved aside (`onDamage`).
    let damageHandler = Mutex<(@Sendable (SpoolDamage) -> Void)?>(nil)
    /// The sinks this spool registered, for a fresh file when the damaged one's list cannot be read.
    let registered = Mutex<[String: Bool]>([:])
    /// A damage found while opening, before anyone could be told: told to the first `onDamage` handler.
    let unreported = Mutex<SpoolDamage?>(nil)

    /// How long a connection waits for another process's write lock before failing with "busy" (retrying each
    /// millisecond: `SQLiteConnection.waitWhileBusy`).
    public static let busyTimeoutMilliseconds = 5000

    /// A WAL larger than this after a checkpoint is truncated (`SQLiteConnection.truncateWAL`). SQLite checkpoints
    /// at 1000 pages (4 MiB), so a WAL of normal use stays under it and keeps its blocks allocated.
    public static let walTrimBytes = 16 << 20

    /// Rows one purge transaction deletes at most (~8 ms here): a concurrent commit waits for one batch, never for
    /// the whole purge (one DELETE of 666,000 rows held the write lock ~5 s; docs/benchmarks.md has the stall).
    public static let purgeBatch = 500

    /// The pause between two purge batches, with the write lock released: a purger that took the lock again at
    /// once kept a concurrent commit out for 2 s. Another process's commit, retrying each millisecond
    /// (`SQLiteConnection.waitWhileBusy`), gets the lock in that pause; in this process, the pipeline's commit
    /// thread gets the connection's mutex.
    public static let purgePause = 0.01

    /// The migration this open ran, if any: schema versions and seconds (the service and the CLI log it).
    public let migration: (from: Int, to: Int, seconds: Double)?

    /// The fields of the one log line about a migration of an existing spool (`spool migrated`); nil when this
    /// open migrated nothing or created the spool.
    public var migrationLogFields: [(String, String)]? {
        guard let step = migration, step.from > 0 else { return nil }
        return [
            ("from", String(step.from)), ("to", String(step.to)), ("seconds", String(format: "%.2f", step.seconds)),
        ]
    }

    /// Opens (creating when missing) and migrates the spool at `path`.
    public init(path: String, synchronous: BridgeConfig.Synchronous = .full) throws(SpoolError) {
        self.path = path
        self.synchronous = synchronous
        writable = true
        let opened:
            (
                writer: SQLiteConnection, bookkeeping: SQLiteConnection,
                migration: (from: Int, to: Int, seconds: Double)?, identity: FileIdentity?
            )
        do {
            opened = try Spool.openWritable(path: path, synchronous: synchronous)
        } catch {
            // A file too damaged to open (its schema unreadable): moved aside, and a fresh spool takes its place.
            guard case .sqlite(let failure) = error, failure.isDamage,
                let aside = Spool.moveAside(path, at: Date())
            else { throw error }
            opened = try Spool.openWritable(path: path, synchronous: synchronous)
            do {
                try Spool.continueFrom(opened.writer, lastSeq: nil, sinks: [])
            } catch let failure as SQLiteError {
                throw .sqlite(failure)
            } catch {
                throw .sqlite(SQLiteError(code: -1, message: "\(error)", context: "open"))
            }
            unreported.withLock {
                $0 = SpoolDamage(path: path, movedTo: aside, error: failure.description, at: Date())
            }
        }
        migration = opened.migration
        connection = Mutex(opened.writer)
        bookkeeping = Mutex(opened.bookkeeping)
        identity = Mutex(opened.identity)
    }

    /// The two connections of a writable spool at `path` (created and migrated as needed), and the file's
    /// identity once open.
    static func openWritable(path: String, synchronous: BridgeConfig.Synchronous) throws(SpoolError) -> (
        writer: SQLiteConnection, bookkeeping: SQLiteConnection,
        migration: (from: Int, to: Int, seconds: Double)?, identity: FileIdentity?
    ) {
        let directory = (path as NSString).deletingLastPathComponent
        try DirectorySync.createDurably(directory.isEmpty ? "." : directory)
        try Spool.createFileIfMissing(path)
        let db: SQLiteConnection
        let migration: (from: Int, to: Int, seconds: Double)?
        do {
            db = try SQLiteConnection(path: path)
            db.waitWhileBusy()
            // WAL lets `spool list` read while `run` writes; it must be set before any transaction.
            try Spool.enableWAL(db)
            db.keepWALAllocated()
            try db.execute("PRAGMA synchronous = \(synchronous.rawValue.uppercased())")
            let started = MonotonicClock.now()
            let from = try db.scalarInt("PRAGMA user_version") ?? 0
            try Spool.migrate(db)
            let to = try db.scalarInt("PRAGMA user_version") ?? 0
            migration = from == to ? nil : (from, to, MonotonicClock.now() - started)
            // A WAL left large by an earlier process (or by that migration) is re-read by every later opener.
            db.truncateWAL(ifLargerThan: Spool.walTrimBytes)
            // The database and its WAL are new names in the directory: until the directory is fsynced, a
            // power cut may undo them, and with them every scan committed meanwhile (SQLite syncs the
            // directory after creating a WAL only on its first WAL sync, never after creating the database).
            // Every open, not only a creating one: a creator killed before this line leaves the same gap.
            try DirectorySync.sync(directory.isEmpty ? "." : directory)
        } catch let error as SQLiteError {
            throw .sqlite(error)
        } catch let error as SpoolError {
            throw error
        } catch {
            throw .sqlite(SQLiteError(code: -1, message: "\(error)", context: "open"))
        }
        do {
            let second = try SQLiteConnection(path: path)
            second.waitWhileBusy()
            try second.execute("PRAGMA synchronous = \(synchronous == .off ? "OFF" : "NORMAL")")
            second.keepWALAllocated()
            return (db, second, migration, FileIdentity(path: path))
        } catch {
            throw .sqlite(error)
        }
    }

    deinit {
        // The last process to close must not leave a large WAL for the next one to re-read.
        _ = connection.withLock { $0.truncateWAL(ifLargerThan: Spool.walTrimBytes) }
    }

    /// Read-only: both connections are opened without write access, nothing is migrated or switched.
    private init(inspecting path: String) throws(SpoolError) {
        self.path = path
        self.migration = nil
        writable = false
        synchronous = .full
        identity = Mutex(FileIdentity(path: path))
        do {
            let db = try SQLiteConnection(path: path, readOnly: true)
            db.waitWhileBusy()
            // A file that is not a spool (another program's SQLite file, an empty file) is refused before any
            // query could depend on our tables.
            let version = try db.scalarInt("PRAGMA user_version") ?? 0
            let tables = try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'scans'")
            guard version > 0, tables == 1 else { throw SpoolError.notASpool(path) }
            if version > Schema.currentVersion {
                throw SpoolError.newerSchema(found: version, supported: Schema.currentVersion)
            }
            if version < Schema.currentVersion {
                throw SpoolError.olderSchema(found: version, supported: Schema.currentVersion)
            }
            connection = Mutex(db)
            bookkeeping = Mutex(try SQLiteConnection(path: path, readOnly: true))
        } catch let error as SQLiteError {
            throw .sqlite(error)
        } catch let error as SpoolError {
            throw error
        } catch {
            throw .sqlite(SQLiteError(code: -1, message: "\(error)", context: "open"))
        }
    }

    /// Opens an existing spool read-only for inspection (`spool list|stats|export`, `status`): it changes
    /// nothing, and refuses a file that is not a spool. Nil when the file does not exist (empty results).
    public static func openIfExists(path: String) throws(SpoolError) -> Spool? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return try Spool(inspecting: path)
    }

    /// Creates a new, empty spool file with the directory's group access (read and write bits only): in the
    /// installed service's directory (`plings`, 0770) the file is 0660, so operators in group plings can add
    /// scans, and SQLite gives its WAL files the same mode. Elsewhere 0600 (or 0640). The umask is bypassed.
    static func createFileIfMissing(_ path: String) throws(SpoolError) {
        var directory = stat()
        let mode: mode_t =
            stat((path as NSString).deletingLastPathComponent, &directory) == 0
            ? 0o600 | (directory.st_mode & 0o060) : 0o600
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        } catch {
            if error.errno == EEXIST { return }
            throw .sqlite(
                SQLiteError(code: -1, message: String(cString: strerror(error.errno)), context: "create \(path)"))
        }
        _ = fchmod(file.rawValue, mode)
    }

    /// Switches to WAL. Changing the journal mode needs an exclusive lock and SQLite does not call the busy
    /// handler for it, so when another process is creating the same spool at that moment the switch fails
    /// with "database is locked": retry for up to the busy timeout. Already WAL (the usual case): no lock.
    static func enableWAL(_ db: SQLiteConnection) throws(SQLiteError) {
        let deadline = MonotonicClock.now() + Double(busyTimeoutMilliseconds) / 1000
        var pause = 0.001
        while true {
            do throws(SQLiteError) {
                let mode = try db.prepare("PRAGMA journal_mode = WAL")
                defer { mode.reset() }
                if try mode.step(), mode.string(0)?.lowercased() == "wal" { return }
                throw SQLiteError(
                    code: 5, message: "journal mode stays \(mode.string(0) ?? "?")", context: "PRAGMA journal_mode")
            } catch {
                guard error.isBusy, MonotonicClock.now() < deadline else { throw error }
                MonotonicClock.sleep(seconds: pause)
                pause = min(pause * 2, 0.05)
            }
        }
    }

    static func migrate(_ db: SQLiteConnection) throws {
        let version = try db.scalarInt("PRAGMA user_version") ?? 0
        if version > Schema.currentVersion {
            throw SpoolError.newerSchema(found: version, supported: Schema.currentVersion)
        }
        for step in version..<Schema.currentVersion {
            try db.transaction { () throws(SQLiteError) in
                // Another process may have migrated while we waited for the lock.
                let now = try db.scalarInt("PRAGMA user_version") ?? 0
                guard now == step else { return }
                if let edit = Schema.declarationEdits[step] { try editDeclaration(db, edit) }
                try db.execute(Schema.migrations[step])
                try db.execute("PRAGMA user_version = \(step + 1)")
            }
        }
    }

    /// Rewrites a table's declaration in `sqlite_schema` (`Schema.declarationEdits`), inside the caller's
    /// transaction, and raises the schema version so every connection reads the new text. Fails when the text to
    /// replace is not there exactly once: the step then changes nothing.
    static func editDeclaration(_ db: SQLiteConnection, _ edit: (table: String, from: String, to: String))
        throws(SQLiteError)
    {
        let version = try db.scalarInt("PRAGMA schema_version") ?? 0
        try db.execute("PRAGMA writable_schema = ON")
        defer { try? db.execute("PRAGMA writable_schema = OFF") }
        let update = try db.prepare(
            """
            UPDATE sqlite_schema SET sql = replace(sql, ?2, ?3)
            WHERE type = 'table' AND name = ?1 AND instr(sql, ?2) > 0 AND instr(substr(sql, instr(sql, ?2) + 1), ?2) = 0
            """)
        try update.bind(1, edit.table)
        try update.bind(2, edit.from)
        try update.bind(3, edit.to)
        try update.step()
        guard db.changes == 1 else {
            throw SQLiteError(
                code: -1, message: "the declaration of \(edit.table) is not the one this step changes",
                context: "migration")
        }
        try db.execute("PRAGMA schema_version = \(version + 1)")
    }

    /// Runs `body` on the writer connection. A file found damaged on the way is moved aside (see
    /// `Spool+Damage.swift`) and the error thrown: the caller's next try goes to a fresh file.
    func withConnection<T>(_ body: (SQLiteConnection) throws(SQLiteError) -> T) throws(SpoolError) -> T {
        try using(connection, body)
    }

    /// The delivery bookkeeping connection (see `bookkeeping`).
    func withBookkeeping<T>(_ body: (SQLiteConnection) throws(SQLiteError) -> T) throws(SpoolError) -> T {
        try using(bookkeeping, body)
    }

    /// Runs `body` on one of the two connections, after following a replaced file; a failure is noted against the
    /// file the statement ran on, not one that replaced it meanwhile.
    private func using<T>(
        _ lock: Mutex<SQLiteConnection>, _ body: (SQLiteConnection) throws(SQLiteError) -> T
    ) throws(SpoolError) -> T {
        try followReplacement()
        var file: FileIdentity?
        do {
            return try lock.withLock { db throws(SQLiteError) in
                file = identity.withLock { $0 }
                defer { db.resetAll() }
                return try body(db)
            }
        } catch {
            noteFailure(error, on: file)
            throw .sqlite(error)
        }
    }

    /// Runs raw SQL on this spool's own connection: tests use it to read per-connection pragmas and to cap the
    /// page count (a full disk on demand).
    func withTestConnection(_ body: (SQLiteConnection) throws(SQLiteError) -> Void) throws(SpoolError) {
        try withConnection(body)
    }

    // MARK: - Writing scans

    /// Commits scans in one transaction; when it returns, every one of them is durable.
    /// Either all are committed or none (a full disk refuses the whole batch).
    public func insert(_ scans: [NewScan]) throws(SpoolError) {
        guard !scans.isEmpty else { return }
        do {
            try insertOnce(scans)
        } catch {
            // A damaged file was just moved aside (found by damage, or by an I/O error its check confirmed): the
            // reads go to the fresh one, never dropped. A second try on a file still in place fails as the first.
            guard case .sqlite(let failure) = error, failure.isDamage || failure.isIOError, writable else {
                throw error
            }
            try insertOnce(scans)
        }
    }

    private func insertOnce(_ scans: [NewScan]) throws(SpoolError) {
        try withConnection { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let statement = try db.prepare(
                    """
                    INSERT INTO scans (id, created_at, state, source_kind, device, uid, raw, input, identifier,
                                       attempts, last_error, symbology, genuine, boot_id, boot_time, clock_trusted)
                    VALUES (?1, ?2, \(Spool.committedState), ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12, ?13, ?14, ?15)
                    """)
                for scan in scans {
                    try statement.bind(1, scan.id)
                    try statement.bind(2, Timestamp.format(scan.read.time))
                    try statement.bind(3, scan.state.rawValue)
                    try statement.bind(4, scan.read.sourceKind.rawValue)
                    try statement.bind(5, scan.read.device)
                    try statement.bind(6, scan.read.uid)
                    try statement.bind(7, scan.read.raw)
                    try statement.bind(8, scan.inputJSON)
                    try statement.bind(9, scan.identifier)
                    try statement.bind(10, scan.reason)
                    try statement.bind(11, scan.read.symbology)
                    try statement.bind(12, scan.read.genuine?.rawValue)
                    try statement.bind(13, scan.read.clock?.bootID)
                    try statement.bind(14, real: scan.read.clock?.bootTime)
                    try statement.bind(15, integer: scan.read.clock.map { $0.trusted ? 1 : 0 })
                    try statement.step()
                }
            }
        }
    }

    /// The state a read is committed with, its pipeline state bound as ?3: a recognized read no enabled sink will
    /// queue (the trigger of schema 3 queues it for every enabled one) is `kept`, the spool its destination.
    static let committedState =
        "CASE WHEN ?3 = 'pending' AND NOT EXISTS (SELECT 1 FROM sinks WHERE enabled = 1) THEN 'kept' ELSE ?3 END"

    // MARK: - Reading

    /// The sink name of the API in `sinks` and `sink_queue` (schema 8): its delivery state is a queue row, as
    /// every sink's is, registered while `api.url` is set.
    public static let apiSink = "api"

    /// The scan `s`'s API queue row as `a` (absent when the API did not queue it): the record's `attempts`,
    /// `lastError`, `nextAttemptAt` and `response` are the API's, the one sink that answers with a body worth
    /// keeping (docs/contracts.md, "Spool record"); each sink's own state is `sinkStates(ids:)`.
    static let recordJoin = "LEFT JOIN sink_queue AS a ON a.seq = s.seq AND a.sink = '\(apiSink)'"

    /// Where a scan's record is read from: the scan (`s`) and its API queue row (`a`, see `recordJoin`). Queries
    /// that start from the API's queue name the same aliases.
    static let recordSource = "scans AS s \(recordJoin)"

    /// The record's columns over `s` and `a` (see `recordSource`), in the order `record` reads them. The state is
    /// the scan's over every sink (schema 10) and `delivered_at` when it was settled; the delivery bookkeeping is
    /// `a`'s (the API's in a listing, the sink's own in its ledger); a scan without such a row keeps its own (an
    /// unrecognized read's reason). An answer the API gave before schema 8 stays in `scans.response`.
    static let columns = """
        s.id, s.created_at, s.state,
        s.source_kind, s.device, s.uid, s.raw, s.input, s.identifier,
        CASE WHEN a.seq IS NULL THEN s.attempts ELSE a.attempts END,
        CASE WHEN a.seq IS NULL THEN s.last_error ELSE a.last_error END,
        CASE WHEN a.seq IS NULL THEN s.next_attempt_at ELSE a.next_attempt_at END,
        s.delivered_at,
        coalesce(a.response, s.response), s.symbology, s.genuine,
        s.boot_id, s.boot_time, s.clock_trusted
        """
    /// The index of the first column a query selects after `columns`.
    static let columnCount: Int32 = 19

    /// The value a state filter binds on a queue row: a sink's `refused` is the record's `dead`.
    static func queueState(_ state: ScanState) -> String { state == .dead ? "refused" : state.rawValue }

    static func record(_ s: Statement) -> ScanRecord {
        func date(_ column: Int32) -> Date? { s.string(column).flatMap(Timestamp.parse) }
        return ScanRecord(
            id: s.string(0) ?? "",
            createdAt: date(1) ?? Date(timeIntervalSince1970: 0),
            state: s.string(2).flatMap(ScanState.init) ?? .dead,
            sourceKind: s.string(3).map { SourceKind($0) } ?? .manual,
            device: s.string(4) ?? "",
            uid: s.string(5),
            raw: s.string(6) ?? "",
            inputJSON: s.string(7),
            identifier: s.string(8),
            attempts: s.int(9),
            lastError: s.string(10),
            nextAttemptAt: date(11),
            deliveredAt: date(12),
            response: s.string(13),
            symbology: s.string(14),
            genuine: s.string(15).flatMap(Originality.init(rawValue:)),
            clock: s.string(16).map { ClockBasis(bootID: $0, bootTime: s.double(17) ?? 0, trusted: s.int(18) != 0) })
    }

    private func query(_ sql: String, bind: (Statement) throws(SQLiteError) -> Void = { _ in }) throws(SpoolError)
        -> [ScanRecord]
    {
        try withConnection { db throws(SQLiteError) in
            let statement = try db.prepare(sql)
            try bind(statement)
            var records: [ScanRecord] = []
            while try statement.step() { records.append(Spool.record(statement)) }
            return records
        }
    }

    /// Scans in capture order, optionally of one state and captured since a time; `limit` 0 means all.
    /// `newest` takes the newest N instead of the oldest (an index walk from the end, as cheap on a spool of a
    /// million scans as on an empty one); `newestFirst` reverses the order of the answer. With `sink`, only the
    /// scans that sink queued, and `state` is the sink's own (`dead`: it refused them).
    public func list(
        state: ScanState? = nil, sink: String? = nil, limit: Int = 0, newest: Int = 0, since: Date? = nil,
        newestFirst: Bool = false
    ) throws(SpoolError) -> [ScanRecord] {
        let fromEnd = newest > 0 || newestFirst
        let records = try query(
            """
            SELECT \(Spool.columns) FROM \(Spool.source(state: state, sink: sink))
                AND (?3 IS NULL OR s.created_at >= ?3)
                ORDER BY s.seq \(fromEnd ? "DESC" : "ASC") LIMIT ?2
            """
        ) { s throws(SQLiteError) in
            try Spool.bindSource(s, state: state, sink: sink)
            let count = newest > 0 ? newest : limit
            try s.bind(2, count > 0 ? count : -1)
            try s.bind(3, since.map(Timestamp.format))
        }
        return fromEnd && !newestFirst ? records.reversed() : records
    }

    /// The capture position from which every pending scan lies: the oldest scan an enabled sink still owes, one
    /// index seek per sink (a SQL expression).
    static let oldestOwed = """
        (SELECT min(m) FROM (SELECT (SELECT min(q.seq) FROM sink_queue AS q WHERE q.sink = k.name AND q.state = 'pending')
            AS m FROM sinks AS k WHERE k.enabled = 1))
        """

    /// `FROM` and the start of `WHERE` for the scans of one state (bound as ?1) and of one sink's queue (?4), each
    /// walked in capture order through an index: a sink's scans through its queue's index by sink and state; settled
    /// and unrecognized scans through their partial indexes; pending scans from the oldest an enabled sink owes.
    static func source(state: ScanState?, sink: String?) -> String {
        if sink != nil {
            let join = "sink_queue AS q JOIN scans AS s ON s.seq = q.seq \(recordJoin) WHERE q.sink = ?4"
            return state == nil ? join : join + " AND q.state = ?1"
        }
        switch state {
        case nil: return "\(recordSource) WHERE 1"
        // Written out, not bound: only a literal lets SQLite use a partial index.
        case .unrecognized: return "\(recordSource) WHERE s.state = 'unrecognized'"
        case .delivered, .dead: return "\(recordSource) WHERE s.state = ?1 AND s.state IN ('delivered', 'dead')"
        case .pending: return "\(recordSource) WHERE s.state = ?1 AND s.seq >= coalesce(\(oldestOwed), 1 << 62)"
        case .kept: return "\(recordSource) WHERE s.state = ?1"
        }
    }

    /// Binds what `source(state:sink:)` names: the state as ?1 (a sink's queue state when a sink is named), the
    /// sink as ?4.
    static func bindSource(_ s: Statement, state: ScanState?, sink: String?) throws(SQLiteError) {
        if let state { try s.bind(1, sink == nil ? state.rawValue : queueState(state)) }
        if let sink { try s.bind(4, sink) }
    }

    /// Calls `body` for every scan in capture order without holding them all in memory (`spool export`).
    public func forEach(state: ScanState? = nil, sink: String? = nil, _ body: (ScanRecord) -> Void)
        throws(SpoolError)
    {
        var after = 0
        while true {
            // Pages of 500 rows, so a long export neither holds the lock nor the whole spool.
            let page: [(Int, ScanRecord)] = try withConnection { db throws(SQLiteError) in
                let statement = try db.prepare(
                    """
                    SELECT \(Spool.columns), s.seq FROM \(Spool.source(state: state, sink: sink)) AND s.seq > ?2
                        ORDER BY s.seq LIMIT 500
                    """)
                try Spool.bindSource(statement, state: state, sink: sink)
                try statement.bind(2, after)
                var rows: [(Int, ScanRecord)] = []
                while try statement.step() {
                    rows.append((statement.int(Spool.columnCount), Spool.record(statement)))
                }
                return rows
            }
            guard let last = page.last else { return }
            page.forEach { body($0.1) }
            after = last.0
        }
    }

    public func record(id: String) throws(SpoolError) -> ScanRecord? {
        try query("SELECT \(Spool.columns) FROM \(Spool.recordSource) WHERE s.id = ?1") { s throws(SQLiteError) in
            try s.bind(1, id)
        }
        .first
    }

    public func stats(now: Date = Date()) throws(SpoolError) -> SpoolStats {
        try withConnection { db throws(SQLiteError) in
            // Every figure is a handful of rows kept by triggers (schemas 4 and 10), flat in the spool's size: the
            // count of each state is its row of `scan_counts`, except the pending one, whose row holds minus every
            // scan ever inserted (`sqlite_sequence`), so committing a pending scan writes no extra page.
            let counted = try db.prepare(
                """
                SELECT state, n + CASE WHEN state = 'pending'
                    THEN coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'scans'), 0) ELSE 0 END
                FROM scan_counts
                """)
            var counts: [ScanState: Int] = [:]
            while try counted.step() {
                if let state = counted.string(0).flatMap(ScanState.init(rawValue:)), counted.int(1) != 0 {
                    counts[state] = counted.int(1)
                }
            }
            // The oldest scan an enabled sink still owes, in capture order.
            let oldest = try db.prepare("SELECT s.created_at FROM scans AS s WHERE s.seq = \(Spool.oldestOwed)")
            var oldestAge: Double?
            if try oldest.step(), let text = oldest.string(0), let date = Timestamp.parse(text) {
                oldestAge = max(0, now.timeIntervalSince(date))
                try oldest.step()
            }
            // The latest error any sink recorded on a scan it still owes or refused.
            let last = try db.prepare(
                """
                SELECT last_error FROM sink_queue WHERE sink IN (SELECT name FROM sinks) AND state IN ('pending', 'refused')
                    AND last_attempt_at IS NOT NULL AND last_error IS NOT NULL ORDER BY last_attempt_at DESC LIMIT 1
                """)
            var lastError: String?
            if try last.step() {
                lastError = last.string(0)
                try last.step()
            }
            let version = try db.scalarInt("PRAGMA user_version") ?? 0
            return SpoolStats(counts: counts, oldestPendingAge: oldestAge, lastError: lastError, schemaVersion: version)
        }
    }

    /// Delivery attempts recorded in this spool by any process since schema 4, and those that failed (the scan
    /// stayed pending for a retry). Counters: they never go down, purges included.
    public func deliveryTotals() throws(SpoolError) -> (attempts: Int, failures: Int) {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare("SELECT name, n FROM delivery_totals")
            var totals = (attempts: 0, failures: 0)
            while try s.step() {
                if s.string(0) == "attempts" { totals.attempts = s.int(1) } else { totals.failures = s.int(1) }
            }
            return totals
        }
    }

    /// A number that changes whenever another connection commits (SQLite's `PRAGMA data_version`). Cheap: it
    /// reads shared memory, so `SpoolChangeWatch` checks it after each write it sees to tell a commit by another
    /// process (`scan`, `spool retry`) from a checkpoint.
    public func dataVersion() throws(SpoolError) -> Int {
        try withConnection { db throws(SQLiteError) in try db.scalarInt("PRAGMA data_version") ?? 0 }
    }
}
