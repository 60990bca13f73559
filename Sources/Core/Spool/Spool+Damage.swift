import BridgeCore
import CSQLite
import Foundation
import Glibc
import Platform

/// Which file a path names (device and inode): a spool moved aside and replaced is another file at the same path.
struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// Nil when nothing is at `path`.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// A damaged spool file that was moved aside (issue 43): what showed the damage, where the file went, when.
public struct SpoolDamage: Sendable, Equatable {
    /// The spool's path, where a fresh file now is.
    public let path: String
    /// The damaged file's new name (`<path>.damaged-<UTC time>`), kept until the operator removes it.
    public let movedTo: String
    /// What SQLite said (`database disk image is malformed`, ...).
    public let error: String
    public let at: Date
}

extension SQLiteError {
    /// The file itself is damaged (SQLITE_CORRUPT, SQLITE_NOTADB): no retry on this file can succeed.
    public var isDamage: Bool { code & 0xFF == SQLITE_CORRUPT || code & 0xFF == SQLITE_NOTADB }
    /// The storage failed to read or write (SQLITE_IOERR): damage when a check of the file says so.
    var isIOError: Bool { code & 0xFF == SQLITE_IOERR }
}

/// A damaged spool is found, moved aside and replaced, and every operation follows (issue 43).
///
/// Found: any statement of either connection that fails with SQLITE_CORRUPT or SQLITE_NOTADB, or with SQLITE_IOERR
/// when a quick check of the file then fails too; and `check()` (the service runs it in the background at start).
/// Moved aside: under both connections' locks the file and its WAL and shared-memory files are renamed to
/// `<path>.damaged-<UTC time>`, the directory is fsynced, a fresh spool is created at the path with its sequence
/// continuing past the damaged file's (so salvaged scans keep their positions and capture order) and the sinks it
/// had, and `onDamage` is told. The read whose commit found the damage is committed to the fresh file
/// (`insert` tries once more). Followed: every operation of every `Spool` (this process's others, other
/// processes') first checks that its path still names the file it has open, and reopens when it does not, so
/// nothing writes into a file known to be damaged after its next operation.
extension Spool {
    /// `handler` is told each time this spool moves a damaged file aside (on the thread that found it).
    public func onDamage(_ handler: @escaping @Sendable (SpoolDamage) -> Void) {
        damageHandler.withLock { $0 = handler }
        let found = unreported.withLock { damage -> SpoolDamage? in
            defer { damage = nil }
            return damage
        }
        if let found { handler(found) }
    }

    /// Renames the spool file and its WAL and shared memory to `<path>.damaged-<UTC time>` and fsyncs the
    /// directory; the new name, or nil when the file could not be renamed.
    static func moveAside(_ path: String, at date: Date) -> String? {
        // Never over another damaged file: two moves within one second (a fresh spool found damaged at once) would
        // otherwise rename the second file over the first, and the first's scans would be gone before any salvage.
        let stamp = path + ".damaged-" + Spool.asideStamp(date)
        let taken = { (name: String) in ["", "-wal", "-shm"].contains { access(name + $0, F_OK) == 0 } }
        guard let aside = ([stamp] + (2...99).map { "\(stamp)-\($0)" }).first(where: { !taken($0) }) else {
            return nil
        }
        guard rename(path, aside) == 0 else { return nil }
        for suffix in ["-wal", "-shm"] { _ = rename(path + suffix, aside + suffix) }
        let directory = (path as NSString).deletingLastPathComponent
        try? DirectorySync.sync(directory.isEmpty ? "." : directory)
        return aside
    }

    /// Runs SQLite's quick check over the whole file (every page's structure; ~1 s per 100 MB here). Returns nil
    /// when it is sound, or when `stop` ended it first (no verdict); else what is wrong. A damaged file of a
    /// writable spool is moved aside.
    public func check(stop: SpoolWorkStop? = nil) throws(SpoolError) -> String? {
        let problem: String?
        let checked = FileIdentity(path: path)
        do {
            let probe = try SQLiteConnection(path: path, readOnly: true)
            if let stop {
                // Stopped, it throws an interrupt (below).
                problem = try stop.running(probe) { () throws(SQLiteError) in try Spool.quickCheck(probe) }
            } else {
                problem = try Spool.quickCheck(probe)
            }
        } catch {
            if error.isInterrupt { return nil }
            problem = error.isDamage || error.isIOError ? error.description : nil
            if problem == nil { throw .sqlite(error) }
        }
        if let problem, writable {
            moveDamagedAside(SQLiteError(code: SQLITE_CORRUPT, message: problem, context: "quick_check"), on: checked)
        }
        return problem
    }

    /// What SQLite's quick check finds wrong with the spool file at `path`, read-only (nothing is moved); nil when
    /// it is sound or cannot be opened at all.
    public static func integrityProblem(path: String) -> String? {
        guard let db = try? SQLiteConnection(path: path, readOnly: true) else { return nil }
        return (try? quickCheck(db)) ?? nil
    }

    /// `PRAGMA quick_check(1)`'s first complaint, or nil for "ok". Throws only when interrupted (a stop), which is
    /// no verdict on the file.
    static func quickCheck(_ db: SQLiteConnection) throws(SQLiteError) -> String? {
        do {
            let statement = try db.prepare("PRAGMA quick_check(1)")
            defer { statement.reset() }
            guard try statement.step() else { return "quick_check gave no answer" }
            let answer = statement.string(0) ?? "?"
            // One plain line: SQLite heads its report with "*** in database main ***" and a line break.
            let line = answer.replacingOccurrences(of: "*** in database main ***", with: "")
                .split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }.joined(separator: "; ")
            return answer == "ok" ? nil : line
        } catch {
            if error.isInterrupt { throw error }
            return error.description
        }
    }

    /// After a failed statement on `file`: damage moves the file aside; an I/O error does when the file fails a
    /// quick check.
    func noteFailure(_ error: SQLiteError, on file: FileIdentity?) {
        guard writable, error.isDamage || error.isIOError else { return }
        if error.isIOError, Spool.integrityProblem(path: path) == nil { return }
        moveDamagedAside(error, on: file)
    }

    /// Reopens both connections when `path` no longer names the file they have open (another process moved a
    /// damaged file aside, or this file was removed).
    func followReplacement() throws(SpoolError) {
        let current = FileIdentity(path: path)
        guard current != identity.withLock({ $0 }) else { return }
        try connection.withLock { (db: inout SQLiteConnection) throws(SpoolError) in
            try bookkeeping.withLock { (keeping: inout SQLiteConnection) throws(SpoolError) in
                // Another thread of this process may have reopened meanwhile.
                guard FileIdentity(path: path) != identity.withLock({ $0 }) else { return }
                try reopen(&db, &keeping)
            }
        }
    }

    /// Both connections to the file now at `path` (locks held).
    private func reopen(_ db: inout SQLiteConnection, _ keeping: inout SQLiteConnection) throws(SpoolError) {
        if writable {
            let opened = try Spool.openWritable(path: path, synchronous: synchronous)
            // Queued for here too: the file's own list may be a fresh one's (the damaged list unreadable).
            let known = registered.withLock { $0 }.filter(\.value).map { ($0.key, true, false) }
            try? opened.writer.transaction { () throws(SQLiteError) in try Spool.addSinks(opened.writer, known) }
            db = opened.writer
            keeping = opened.bookkeeping
            identity.withLock { $0 = opened.identity }
        } else {
            guard FileIdentity(path: path) != nil else { throw .notASpool(path) }
            do {
                db = try SQLiteConnection(path: path, readOnly: true)
                db.waitWhileBusy()
                keeping = try SQLiteConnection(path: path, readOnly: true)
                keeping.waitWhileBusy()
            } catch {
                throw .sqlite(error)
            }
            identity.withLock { $0 = FileIdentity(path: path) }
        }
    }

    /// Moves the damaged file (and its WAL and shared memory) aside and opens a fresh spool in its place (see the
    /// type's comment). Quiet when another thread or process already did; a failure leaves things as they were
    /// (the next operation finds the damage again).
    func moveDamagedAside(_ error: SQLiteError, on file: FileIdentity?) {
        let damage: SpoolDamage? = connection.withLock { (db: inout SQLiteConnection) -> SpoolDamage? in
            bookkeeping.withLock { (keeping: inout SQLiteConnection) -> SpoolDamage? in
                // Already moved (by another thread here, or another process): follow it instead. The file that
                // failed must still be the one at the path: a statement of the other connection that failed on the
                // damaged file while this thread was moving it must not move the fresh one.
                let current = FileIdentity(path: path)
                guard current == identity.withLock({ $0 }), current == file else {
                    try? reopen(&db, &keeping)
                    return nil
                }
                // What can still be read of it: where its sequence had got to, and the sinks it queued for.
                let lastSeq =
                    (try? db.scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'scans'"))
                    ?? (try? db.scalarInt("SELECT max(seq) FROM scans"))
                var sinks = registered.withLock { $0 }.map { ($0.key, $0.value, false) }
                if let listed = try? Spool.sinkRows(db) { sinks = listed }
                db.resetAll()
                keeping.resetAll()
                // Every frame this process committed goes into the damaged file before it moves: this connection
                // trusts its index of the WAL, where a fresh reader (the salvage) would stop at a torn frame and
                // lose every commit after it (a frame is checked only when the index is rebuilt). SQLite would not
                // checkpoint the moved file when it closes (it skips a file that has been renamed). A failing or
                // full card refuses the checkpoint: the salvage then reads what a fresh reader can.
                _ = db.truncateWAL(ifLargerThan: -1)
                let now = Date()
                guard let aside = Spool.moveAside(path, at: now) else { return nil }
                do {
                    let opened = try Spool.openWritable(path: path, synchronous: synchronous)
                    try Spool.continueFrom(opened.writer, lastSeq: lastSeq, sinks: sinks)
                    db = opened.writer
                    keeping = opened.bookkeeping
                    identity.withLock { $0 = opened.identity }
                } catch {
                    // The fresh file could not be made (a full or failing card): the next operation tries again.
                    identity.withLock { $0 = nil }
                }
                return SpoolDamage(path: path, movedTo: aside, error: error.description, at: now)
            }
        }
        if let damage { damageHandler.withLock { $0 }?(damage) }
    }

    /// `name, enabled, recognized_only` of every sink in `sinks`.
    static func sinkRows(_ db: SQLiteConnection) throws(SQLiteError) -> [(String, Bool, Bool)] {
        let s = try db.prepare("SELECT name, enabled, recognized_only FROM sinks")
        defer { s.reset() }
        var rows: [(String, Bool, Bool)] = []
        while try s.step() { rows.append((s.string(0) ?? "", s.int(1) != 0, s.int(2) != 0)) }
        return rows
    }

    /// A fresh spool that takes over from a damaged one: its sequence starts past the damaged file's last (unknown:
    /// past any a year of scans reaches), so salvaged scans keep their positions below every new one, and it
    /// queues for the same sinks. The pending count (the sequence minus the `pending` row of `scan_counts`, see
    /// Schema 4) is kept exact.
    static func continueFrom(_ db: SQLiteConnection, lastSeq: Int?, sinks: [(String, Bool, Bool)]) throws {
        let start = lastSeq.flatMap { $0 > 0 ? $0 : nil } ?? 1 << 32
        try db.transaction { () throws(SQLiteError) in
            let current = try db.scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'scans'") ?? 0
            if start > current {
                try db.execute("DELETE FROM sqlite_sequence WHERE name = 'scans'")
                try db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('scans', \(start))")
                try db.execute("UPDATE scan_counts SET n = n - \(start - current) WHERE state = 'pending'")
            }
            try addSinks(db, sinks)
        }
    }

    /// Lists each sink (`name, enabled, recognized_only`) in a fresh file as the damaged one had it (the API, which
    /// `run` may have disabled, included; its `recognized_only` is the fresh file's own).
    static func addSinks(_ db: SQLiteConnection, _ sinks: [(String, Bool, Bool)]) throws(SQLiteError) {
        let insert = try db.prepare(
            """
            INSERT INTO sinks (name, enabled, recognized_only) VALUES (?1, ?2, ?3)
                ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled
            """)
        for (name, enabled, recognizedOnly) in sinks {
            insert.reset()
            try insert.bind(1, name)
            try insert.bind(2, enabled ? 1 : 0)
            try insert.bind(3, recognizedOnly ? 1 : 0)
            try insert.step()
        }
    }

    /// `20261204T035012Z`: sortable, and a legal file name everywhere.
    static func asideStamp(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(
            format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
            parts.tm_min, parts.tm_sec)
    }
}
