import BridgeCore
import Foundation
import Platform

/// The operator's actions on the store (`spool retry`, `spool purge`, the service's retention): dead scans revived,
/// delivered scans pruned in bounded batches. The store itself is `Spool.swift`, the sinks' delivery ledger
/// `Spool+Delivery.swift`, which sinks are fed and their counts `Spool+Sinks.swift`, the local interface's reads
/// `Spool+Feed.swift`.
extension Spool {
    /// Revives one scan for every sink that refused it or still owes it (or for `sink` alone): pending again, attempts
    /// and backoff reset. Returns false when no sink has it refused or pending.
    public func retry(id: String, sink: String? = nil) throws(SpoolError) -> Bool {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                UPDATE sink_queue SET state = 'pending', attempts = 0, next_attempt_at = NULL
                WHERE seq = (SELECT seq FROM scans WHERE id = ?1) AND state IN ('refused', 'pending')
                  AND (?2 IS NULL OR sink = ?2)
                """)
            try s.bind(1, id)
            try s.bind(2, sink)
            try s.step()
            return db.changes > 0
        }
    }

    /// Revives every scan a sink refused, of every sink or of `sink` alone; returns how many queue rows.
    public func retryDead(sink: String? = nil) throws(SpoolError) -> Int {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                UPDATE sink_queue SET state = 'pending', attempts = 0, next_attempt_at = NULL
                WHERE state = 'refused' AND (?1 IS NULL OR sink = ?1)
                """)
            try s.bind(1, sink)
            try s.step()
            return db.changes
        }
    }

    /// Queues every kept scan (read while no sink was enabled: the API configured after them, say) for `sink`, or
    /// for every enabled sink; returns how many queue rows. A sink enabled now owes them at once; one not yet
    /// enabled owes them once it is (enabling a sink does not replay history: this is how an operator asks for it).
    public func queueKept(for sink: String? = nil) throws(SpoolError) -> Int {
        try withConnection { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) -> Int in
                let insert = try db.prepare(
                    """
                    INSERT INTO sink_queue (sink, seq, state, identifier)
                        SELECT k.name, s.seq, 'pending', s.identifier FROM scans AS s JOIN sinks AS k
                            ON (?1 IS NULL AND k.enabled = 1) OR k.name = ?1
                        WHERE s.state = 'kept'
                    ON CONFLICT DO NOTHING
                    """)
                try insert.bind(1, sink)
                try insert.step()
                let queued = db.changes
                // The scans' own state follows their new rows (schema 10's trigger, fired by a change of state).
                try db.execute(
                    """
                    UPDATE sink_queue SET state = state
                    WHERE state = 'pending' AND seq IN (SELECT seq FROM scans WHERE state = 'kept')
                    """)
                return queued
            }
        }
    }

    /// Copies every committed frame of the WAL into the file and empties the WAL (a TRUNCATE checkpoint), for a
    /// clean stop of the service; false when a reader in another process kept it from finishing (it then does
    /// nothing harmful: the WAL stays as it was).
    @discardableResult
    public func checkpointAtStop() -> Bool {
        (try? withConnection { db throws(SQLiteError) in db.truncateWAL(ifLargerThan: -1) }) ?? false
    }

    /// The names of the sinks this spool has queues for (enabled or not), in name order.
    public func sinkNames() throws(SpoolError) -> [String] {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare("SELECT name FROM sinks ORDER BY name")
            var names: [String] = []
            while try s.step() { names.append(s.string(0) ?? "") }
            return names
        }
    }

    /// Deletes the scans settled before `cutoff`: every sink that queued them took them (`delivered`) or refused
    /// them (`dead`), the last of them before `cutoff` (docs/contracts.md, "Spool record": the retention follows
    /// every sink). Returns how many. Pending, kept and unrecognized scans are never pruned.
    ///
    /// In transactions of at most `batch` rows, each over the next window of delivered scans in capture order,
    /// so each is bounded work (an index range, not a rescan) and a concurrent commit, in this process or
    /// another, waits for one batch at most. `progress` gets the running total after each batch. Afterwards a
    /// WAL the purge grew is truncated. A `stop` ends it between batches (the next round goes on from the start).
    public func purgeDelivered(
        before cutoff: Date, batch: Int = Spool.purgeBatch, stop: SpoolWorkStop? = nil,
        progress: ((Int) -> Void)? = nil
    ) throws(SpoolError) -> Int {
        let cutoffText = Timestamp.format(cutoff)
        var total = 0
        var after = 0
        // A checkpoint inside a batch's commit (SQLite runs one when the WAL passes 1,000 pages) copied those pages
        // and fsynced the database with the lock and the mutex held: the rare batch took 0.2-0.8 s. During the
        // purge the checkpoints run between batches instead, on the bookkeeping connection, holding neither.
        try withConnection { db throws(SQLiteError) in try db.execute("PRAGMA wal_autocheckpoint = 0") }
        defer {
            _ = try? withConnection { db throws(SQLiteError) in try db.execute("PRAGMA wal_autocheckpoint = 1000") }
        }
        var batches = 0
        while stop?.isStopped != true {
            let window: (end: Int, deleted: Int)? = try withConnection { db throws(SQLiteError) in
                try db.transaction { () throws(SQLiteError) -> (end: Int, deleted: Int)? in
                    let end = try db.prepare(
                        """
                        SELECT max(seq) FROM (SELECT seq FROM scans WHERE state IN ('delivered', 'dead')
                            AND seq > ?1 ORDER BY seq LIMIT ?2)
                        """)
                    try end.bind(1, after)
                    try end.bind(2, batch)
                    guard try end.step(), !end.isNull(0) else { return nil }
                    let last = end.int(0)
                    try end.step()
                    // Through the index of settled scans (schema 10); a scan an enabled sink still owes is pending.
                    let s = try db.prepare(
                        """
                        DELETE FROM scans WHERE seq IN (
                            SELECT seq FROM scans WHERE state IN ('delivered', 'dead')
                                AND seq > ?1 AND seq <= ?2 AND delivered_at < ?3)
                        """)
                    try s.bind(1, after)
                    try s.bind(2, last)
                    try s.bind(3, cutoffText)
                    try s.step()
                    return (last, db.changes)
                }
            }
            guard let window else { break }
            after = window.end
            total += window.deleted
            progress?(total)
            batches += 1
            if batches % 4 == 0 {
                _ = try? withBookkeeping { db throws(SQLiteError) in try db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
            }
            MonotonicClock.sleep(seconds: Spool.purgePause)
        }
        _ = connection.withLock { $0.truncateWAL(ifLargerThan: Spool.walTrimBytes) }
        return total
    }
}
