import BridgeCore
import Foundation

/// One sink's delivery ledger on the spool: claiming the scans of the sink's queue that may be sent now (with a
/// lease), keeping which were sent together in a batch, recording each scan's outcome (attempts, its own backoff,
/// last error, the answer), and the sink's next wake-up. Its rule of order is per identifier: a later scan of an
/// identifier never overtakes an earlier one (docs/contracts.md, "Delivery order"); a scan without an identifier
/// (an unrecognized read, queued for a webhook) waits for none. The queue sink runner keeps every sink's queue
/// with it (the API's, MQTT's, the webhook's), by the sink's name: the statements bind the name as `?9`, so none
/// of them names a sink. The records it hands out carry this sink's delivery state (attempts, last error, lease) where
/// `Spool.record(id:)` gives the API's, the scan's state by contract. A kind whose rule is capture order over
/// every identifier (MQTT) claims with `claimInCaptureOrder` and records through the same calls. It
/// runs on the `bookkeeping` connection (`synchronous=NORMAL`, see `Spool`); accepting scans and operator actions
/// are in Spool.swift, which sinks are fed and their counts in Spool+Sinks.swift.
public struct DeliveryLedger: Sendable {
    public let spool: Spool
    /// The sink whose queue rows this ledger keeps.
    public let sink: String

    /// Prepares `sql`, a statement on this sink's rows, with the sink's name bound as `?9`.
    func prepare(_ db: SQLiteConnection, _ sql: String) throws(SQLiteError) -> Statement {
        let statement = try db.prepare(sql)
        try statement.bind(9, sink)
        return statement
    }
}

extension Spool {
    /// The delivery ledger of `sink`'s queue (see `DeliveryLedger`).
    public func ledger(_ sink: String) -> DeliveryLedger { DeliveryLedger(spool: self, sink: sink) }

    /// The longest wait the forwarder ever sets on a scan: a `Retry-After` (capped at one hour) or a lease (the
    /// request timeout plus 5 s), with room to spare. A `next_attempt_at` further ahead than this was written
    /// before the wall clock was stepped back (a box booting without a real-time clock, then NTP): such a scan
    /// is due now, or it would wait for as long as the step.
    public static let longestWait: Double = 2 * 3600

    /// The SQL condition "due at ?1", where ?3 is ?1 + `longestWait` (see there); `a` is the sink's queue row.
    static let dueCondition =
        "(a.next_attempt_at IS NULL OR a.next_attempt_at <= ?1 OR a.next_attempt_at > ?3)"

    /// The SQL condition "`a` heads its identifier": no scan of the same identifier captured before it is
    /// pending for the sink ?9 (docs/contracts.md, "Delivery order"). Only a head may be sent, so a later scan of
    /// an identifier never overtakes an earlier one. `a` is the sink's queue row being tested.
    static let headOfIdentifier = """
        NOT EXISTS (SELECT 1 FROM sink_queue AS e WHERE e.sink = ?9 AND e.state = 'pending'
                    AND e.identifier = a.identifier AND e.seq < a.seq)
        """

    /// The sink ?9's pending queue rows joined to their scans (`a` and `s`, as `columns` names them).
    static let pendingRows = """
        sink_queue AS a JOIN scans AS s ON s.seq = a.seq
        WHERE a.sink = ?9 AND a.state = 'pending'
        """

    /// Moves a scan's lease on the sink ?9's queue: its next attempt at ?2 (nil: due now). ?1 is the scan's id.
    static let setNextAttempt = """
        UPDATE sink_queue SET next_attempt_at = ?2
        WHERE sink = ?9 AND seq = (SELECT seq FROM scans WHERE id = ?1)
        """

    /// A `WITH` clause naming `heads`: the first pending scan of every identifier with a pending scan, found by
    /// one seek per identifier in the pending-identifier index (a recursive skip over its distinct identifiers)
    /// rather than by testing every pending scan; and every pending scan without an identifier (an unrecognized
    /// read, which a webhook is sent too), each the head of its own.
    static let identifierHeads = """
        WITH RECURSIVE ids(identifier) AS (
            SELECT (SELECT identifier FROM sink_queue INDEXED BY sink_queue_pending_identifier
                    WHERE sink = ?9 AND state = 'pending' AND identifier IS NOT NULL ORDER BY identifier LIMIT 1)
            UNION ALL
            SELECT (SELECT identifier FROM sink_queue INDEXED BY sink_queue_pending_identifier
                    WHERE sink = ?9 AND state = 'pending' AND identifier > ids.identifier
                    ORDER BY identifier LIMIT 1)
            FROM ids WHERE ids.identifier IS NOT NULL
        ),
        heads AS (
            SELECT (SELECT seq FROM sink_queue INDEXED BY sink_queue_pending_identifier
                    WHERE sink = ?9 AND state = 'pending' AND identifier = ids.identifier
                    ORDER BY seq LIMIT 1) AS seq
            FROM ids WHERE ids.identifier IS NOT NULL
            UNION ALL
            SELECT seq FROM sink_queue INDEXED BY sink_queue_pending_identifier
            WHERE sink = ?9 AND state = 'pending' AND identifier IS NULL
        )
        """

    /// The heads of `identifierHeads` as the sink ?9's queue rows and their scans (`a` and `s`). `CROSS JOIN`
    /// keeps the heads the outer loop: with the heads a compound query, SQLite's planner would otherwise walk every
    /// queue row of the sink and look each up among the heads (measured: a 100,000-scan drain 11 times slower).
    static let headRows = """
        heads CROSS JOIN sink_queue AS a ON a.sink = ?9 AND a.seq = heads.seq
        CROSS JOIN scans AS s ON s.seq = heads.seq
        """
}

extension DeliveryLedger {
    /// Claims up to `limit` scans that may be sent now, each to go in a request of its own (`claimBatches` with a
    /// batch size of 1).
    public func claimDeliverable(now: Date, lease: Double, limit: Int, busy: Set<String>) throws(SpoolError)
        -> [ScanRecord]
    {
        try claimBatches(now: now, lease: lease, batches: limit, batchSize: 1, busy: busy).flatMap(\.records)
    }

    /// Claims up to `batches` requests' worth of scans that may be sent now: pending, due, and the oldest pending
    /// scan of their identifier (so a later scan never overtakes an earlier one), skipping identifiers in `busy`;
    /// grouped in capture order into batches of up to `batchSize` scans (docs/contracts.md, "Batched request").
    ///
    /// A batch whose request got no answer, or one that applied to all of it (a 5xx, a refused token), is sent
    /// again as it was: the same scans under the same key, so the API can tell the repeat of a request it may
    /// have executed. If one of them can no longer go with the others (an operator purged it, or revived an
    /// earlier scan of its identifier), the batch is dissolved and its scans go in new batches under new keys.
    ///
    /// Claiming moves `next_attempt_at` forward by `lease`, so another process (a `scan` command, a second
    /// service by mistake) does not send the same scan at the same time; if we die, the lease runs out and the
    /// scan is retried. Delivery stays at-least-once: the idempotency key covers a retry after a lost answer.
    public func claimBatches(now: Date, lease: Double, batches: Int, batchSize: Int, busy: Set<String>)
        throws(SpoolError) -> [DeliveryBatch]
    {
        guard batches > 0 else { return [] }
        let size = max(1, batchSize)
        return try spool.withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let heads = try dueHeads(db: db, now: now, limit: batches * size, busy: busy)
                var claimed: [DeliveryBatch] = []
                var taken = Set<String>()
                var fresh: [ScanRecord] = []
                for head in heads where !taken.contains(head.id) {
                    if let stored = try storedBatch(of: head, db: db, now: now, busy: busy, taken: taken, size: size) {
                        guard claimed.count < batches else { break }
                        claimed.append(stored)
                        taken.formUnion(stored.records.map(\.id))
                    } else {
                        fresh.append(head)
                        taken.insert(head.id)
                    }
                }
                // The rest in capture order, `size` at a time.
                var start = 0
                while start < fresh.count, claimed.count < batches {
                    let members = Array(fresh[start..<min(start + size, fresh.count)])
                    start += members.count
                    // A lone scan's key is its own id; it is kept as a batch of one all the same, so a retry
                    // without an answer goes alone again rather than inside a batch under another key.
                    let key = members.count == 1 ? members[0].id : UUID().uuidString.lowercased()
                    try remember(batch: key, members: members.map(\.id), db: db)
                    claimed.append(DeliveryBatch(key: key, records: members))
                }
                let leaseUntil = Timestamp.format(now.addingTimeInterval(lease))
                let update = try prepare(db, Spool.setNextAttempt)
                for record in claimed.flatMap(\.records) {
                    try update.bind(1, record.id)
                    try update.bind(2, leaseUntil)
                    try update.step()
                }
                return claimed
            }
        }
    }

    /// The pending scans that head their identifier and are due at `now`, oldest first, at most `limit`,
    /// skipping identifiers in `busy`; flat in the spool's size.
    ///
    /// Usually the oldest pending scans hold enough heads, so a bounded window of them is looked at first. When
    /// they do not (a long backlog of a few identifiers: every scan behind the first of its identifier is not a
    /// head), the heads are found through the pending-identifier index instead, one seek per identifier, rather
    /// than by testing every pending scan (measured: 0.8 ms instead of 525 ms for 1,000,000 pending scans of 97
    /// identifiers).
    func dueHeads(db: SQLiteConnection, now: Date, limit: Int, busy: Set<String>) throws(SQLiteError)
        -> [ScanRecord]
    {
        let wanted = limit + busy.count
        let windowSize = max(256, 4 * wanted)
        let window = try prepare(
            db,
            """
            SELECT \(Spool.columns), (\(Spool.dueCondition) AND \(Spool.headOfIdentifier))
            FROM \(Spool.pendingRows) ORDER BY a.seq LIMIT ?2
            """)
        try window.bind(1, Timestamp.format(now))
        try window.bind(2, windowSize)
        try window.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
        var heads: [ScanRecord] = []
        var looked = 0
        while try window.step() {
            looked += 1
            guard window.int(Spool.columnCount) != 0 else { continue }
            let record = Spool.record(window)
            if let identifier = record.identifier, busy.contains(identifier) { continue }
            heads.append(record)
            if heads.count == limit {
                window.reset()
                return heads
            }
        }
        if looked < windowSize { return heads }  // every pending scan was looked at
        let seek = try prepare(
            db,
            """
            \(Spool.identifierHeads)
            SELECT \(Spool.columns) FROM \(Spool.headRows) WHERE \(Spool.dueCondition) ORDER BY a.seq LIMIT ?2
            """)
        try seek.bind(1, Timestamp.format(now))
        try seek.bind(2, wanted)
        try seek.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
        heads = []
        while try seek.step() {
            let record = Spool.record(seek)
            if let identifier = record.identifier, busy.contains(identifier) { continue }
            if heads.count < limit { heads.append(record) }
        }
        return heads
    }

    /// The batch `head` was last sent in, when every member of it may go again together now; nil when it was
    /// sent alone. A batch that cannot go as it was is dissolved here (its members go in new batches).
    private func storedBatch(
        of head: ScanRecord, db: SQLiteConnection, now: Date, busy: Set<String>, taken: Set<String>, size: Int
    ) throws(SQLiteError) -> DeliveryBatch? {
        let lookup = try prepare(db, "SELECT batch, size FROM batch_members WHERE sink = ?9 AND scan_id = ?1")
        try lookup.bind(1, head.id)
        guard try lookup.step(), let key = lookup.string(0) else { return nil }
        let expected = lookup.int(1)
        lookup.reset()
        // In capture order, as the batch was first sent; a member purged since is missing here.
        let list = try prepare(
            db,
            "SELECT b.scan_id FROM batch_members AS b JOIN scans AS s ON s.id = b.scan_id WHERE b.sink = ?9 AND b.batch = ?1 ORDER BY s.seq"
        )
        try list.bind(1, key)
        var ids: [String] = []
        while try list.step() { ids.append(list.string(0) ?? "") }
        var members: [ScanRecord] = []
        if size > 1 || expected == 1, ids.count == expected, ids.count <= max(size, 1) {
            for id in ids {
                let member = try prepare(
                    db,
                    """
                    SELECT \(Spool.columns) FROM \(Spool.pendingRows)
                      AND s.id = ?2
                      AND \(Spool.dueCondition)
                      AND \(Spool.headOfIdentifier)
                    """)
                try member.bind(1, Timestamp.format(now))
                try member.bind(2, id)
                try member.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
                guard try member.step() else { break }
                let record = Spool.record(member)
                member.reset()
                if taken.contains(record.id) || record.identifier.map(busy.contains) == true { break }
                members.append(record)
            }
        }
        guard members.count == expected, ids.count == expected else {
            try dissolve(batch: key, db: db)
            return nil
        }
        return DeliveryBatch(key: key, records: members)
    }

    /// Keeps the members of a request until its answer comes (`storedBatch` claims them again together).
    func remember(batch key: String, members: [String], db: SQLiteConnection) throws(SQLiteError) {
        let insert = try prepare(
            db,
            "INSERT OR REPLACE INTO batch_members (sink, scan_id, batch, size) VALUES (?9, ?1, ?2, ?3)")
        for member in members {
            try insert.bind(1, member)
            try insert.bind(2, key)
            try insert.bind(3, members.count)
            try insert.step()
        }
    }

    func dissolve(batch key: String, db: SQLiteConnection) throws(SQLiteError) {
        let delete = try prepare(db, "DELETE FROM batch_members WHERE sink = ?9 AND batch = ?1")
        try delete.bind(1, key)
        try delete.step()
    }

    /// Claims one scan for the `scan` command's single attempt, only if no earlier scan of its identifier is
    /// pending (docs/contracts.md, "Delivery order"). Returns nil when it must be left to `run`.
    public func claimIfHead(id: String, now: Date, lease: Double) throws(SpoolError) -> ScanRecord? {
        try spool.withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let select = try prepare(
                    db,
                    """
                    SELECT \(Spool.columns) FROM \(Spool.pendingRows)
                      AND s.id = ?2
                      AND \(Spool.dueCondition)
                      AND \(Spool.headOfIdentifier)
                      AND NOT EXISTS (SELECT 1 FROM batch_members AS b WHERE b.sink = ?9 AND b.scan_id = s.id)
                    """)
                try select.bind(1, Timestamp.format(now))
                try select.bind(2, id)
                try select.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
                guard try select.step() else { return nil }
                let record = Spool.record(select)
                try select.step()
                let update = try prepare(db, Spool.setNextAttempt)
                try update.bind(1, id)
                try update.bind(2, Timestamp.format(now.addingTimeInterval(lease)))
                try update.step()
                try remember(batch: id, members: [id], db: db)
                return record
            }
        }
    }

    /// Claims up to `limit` scans for a sink whose rule of order is capture order over every identifier (MQTT: a
    /// subscriber sees the scans in the order they were read): the oldest pending scans after capture position
    /// `afterSeq`, skipping those in `busy` (ids this process has in flight), and none behind a scan that is not
    /// due yet (its backoff), so nothing overtakes it. Each with its position, for the caller's next `afterSeq`.
    /// No lease is written: only the service sends to such a sink, and a service that died left nothing another
    /// process waits out (its next start sends from the oldest pending scan again).
    public func claimInCaptureOrder(now: Date, afterSeq: Int, limit: Int, busy: Set<String>) throws(SpoolError)
        -> [SinkItem]
    {
        guard limit > 0 else { return [] }
        return try spool.withBookkeeping { db throws(SQLiteError) in
            // Scans in flight are skipped by SQLite (one lookup each in a table it builds once from the list); a
            // caller that knows none lie after `afterSeq` passes an empty list.
            let s = try prepare(
                db,
                """
                SELECT \(Spool.columns), \(Spool.dueCondition), a.seq FROM \(Spool.pendingRows)
                  AND a.seq > ?5 AND s.id NOT IN (SELECT value FROM json_each(?4))
                ORDER BY a.seq LIMIT ?2
                """)
            try s.bind(1, Timestamp.format(now))
            try s.bind(2, limit)
            try s.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
            try s.bind(4, busy.isEmpty ? "[]" : JSONValue.array(busy.map { .string($0) }).encoded())
            try s.bind(5, afterSeq)
            var claimed: [SinkItem] = []
            while try s.step() {
                guard s.int(Spool.columnCount) != 0 else { break }
                claimed.append(SinkItem(seq: s.int(Spool.columnCount + 1), record: Spool.record(s)))
            }
            s.reset()
            return claimed
        }
    }

    /// When the oldest pending scan not in `busy` becomes due, for a sink in capture order (see
    /// `claimInCaptureOrder`); nil when none is pending. A time further ahead of `now` than `longestWait` counts as
    /// due (a wall clock stepped back).
    public func nextDueInCaptureOrder(now: Date, busy: Set<String>) throws(SpoolError) -> Date? {
        try spool.withBookkeeping { db throws(SQLiteError) in
            let s = try prepare(
                db, "SELECT s.id, a.next_attempt_at FROM \(Spool.pendingRows) ORDER BY a.seq LIMIT ?1")
            try s.bind(1, busy.count + 1)
            while try s.step() {
                guard let id = s.string(0), !busy.contains(id) else { continue }
                let next = s.string(1).flatMap(Timestamp.parse)
                s.reset()
                guard let next, next.timeIntervalSince(now) <= Spool.longestWait else {
                    return Date(timeIntervalSince1970: 0)
                }
                return next
            }
            return nil
        }
    }

    /// The earliest time a pending scan that heads its identifier becomes due (scans behind an earlier one of
    /// their identifier wait for it, not for a time), for the forwarder's sleep; nil when none is pending.
    /// A time further ahead of `now` than `longestWait` counts as due (a wall clock stepped back).
    public func nextDueTime(now: Date) throws(SpoolError) -> Date? {
        try spool.withBookkeeping { db throws(SQLiteError) in
            // One seek per pending identifier to its first pending scan (see `dueHeads`), not a test of every
            // pending scan.
            let s = try prepare(
                db,
                """
                \(Spool.identifierHeads)
                SELECT MIN(CASE WHEN a.next_attempt_at IS NULL OR a.next_attempt_at > ?1 THEN ''
                                ELSE a.next_attempt_at END) FROM \(Spool.headRows)
                """)
            try s.bind(1, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
            guard try s.step(), !s.isNull(0), let text = s.string(0) else { return nil }
            try s.step()
            return text.isEmpty ? Date(timeIntervalSince1970: 0) : Timestamp.parse(text)
        }
    }

    /// Records an attempt's result. Only a row still `pending` changes: if an operator purged or revived it
    /// meanwhile, their action wins.
    public func recordOutcome(id: String, outcome: RecordedOutcome, now: Date) throws(SpoolError) {
        try spool.withBookkeeping { db throws(SQLiteError) in try record(outcome, id: id, now: now, db: db) }
    }

    func record(_ outcome: RecordedOutcome, id: String, now: Date, db: SQLiteConnection) throws(SQLiteError) {
        let s = try prepare(
            db,
            """
            UPDATE sink_queue SET state = ?2, attempts = attempts + 1, last_error = ?3, next_attempt_at = ?4,
                                  delivered_at = ?5, response = COALESCE(?6, response), last_attempt_at = ?7
            WHERE sink = ?9 AND seq = (SELECT seq FROM scans WHERE id = ?1) AND state = 'pending'
            """)
        try s.bind(1, id)
        try s.bind(7, Timestamp.format(now))
        switch outcome {
        case .delivered(let response):
            try s.bind(2, ScanState.delivered.rawValue)
            try s.bind(3, nil)
            try s.bind(4, nil)
            try s.bind(5, Timestamp.format(now))
            try s.bind(6, response)
        case .dead(let reason, let response):
            try s.bind(2, Spool.queueState(.dead))
            try s.bind(3, reason)
            try s.bind(4, nil)
            try s.bind(5, nil)
            try s.bind(6, response)
        case .retry(let reason, let nextAttempt):
            try s.bind(2, ScanState.pending.rawValue)
            try s.bind(3, reason)
            try s.bind(4, Timestamp.format(nextAttempt))
            try s.bind(5, nil)
            try s.bind(6, nil)
        }
        try s.step()
    }

    /// Delivery is paused (the API refused our token): the scan stays pending and due, its attempt is not
    /// counted against it, and the reason is kept for `spool stats`.
    public func recordPaused(id: String, reason: String, now: Date) throws(SpoolError) {
        try spool.withBookkeeping { db throws(SQLiteError) in try recordPaused(id: id, reason: reason, now: now, db: db)
        }
    }

    func recordPaused(id: String, reason: String, now: Date, db: SQLiteConnection) throws(SQLiteError) {
        let s = try prepare(
            db,
            """
            UPDATE sink_queue SET last_error = ?2, next_attempt_at = NULL, last_attempt_at = ?3
            WHERE sink = ?9 AND seq = (SELECT seq FROM scans WHERE id = ?1) AND state = 'pending'
            """)
        try s.bind(1, id)
        try s.bind(2, reason)
        try s.bind(3, Timestamp.format(now))
        try s.step()
    }

    /// Makes every pending scan that is backing off due now, except those leased in `except`: the API came
    /// back, so the backlog drains at once instead of each scan waiting out its own backoff.
    @discardableResult
    public func makeBackoffDue(now: Date, except: Set<String>) throws(SpoolError) -> Int {
        try spool.withBookkeeping { db throws(SQLiteError) in
            let s = try prepare(
                db,
                """
                UPDATE sink_queue SET next_attempt_at = NULL
                WHERE sink = ?9 AND state = 'pending' AND next_attempt_at > ?1
                  AND seq NOT IN (SELECT seq FROM scans WHERE id IN (SELECT value FROM json_each(?2)))
                """)
            try s.bind(1, Timestamp.format(now))
            try s.bind(2, JSONValue.array(except.map { .string($0) }).encoded())
            try s.step()
            return db.changes
        }
    }

    /// Records what one request's answer left on each of its scans, in one transaction. `keepBatch` keeps the
    /// batch's membership for a retry of the same request (no answer, or one answer for all of it); otherwise
    /// its scans were answered one by one, and each goes in a new request next time.
    public func recordAttempts(
        batch key: String, _ records: [(id: String, record: AttemptRecord)], keepBatch: Bool, now: Date
    ) throws(SpoolError) {
        try spool.withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                for (id, attempt) in records {
                    switch attempt {
                    case .outcome(let outcome): try record(outcome, id: id, now: now, db: db)
                    case .paused(let reason): try recordPaused(id: id, reason: reason, now: now, db: db)
                    case .released: try release(id: id, db: db)
                    }
                }
                if !keepBatch { try dissolve(batch: key, db: db) }
            }
        }
    }

    /// Releases a claimed scan without counting an attempt (shutdown abandoned the request).
    public func release(id: String) throws(SpoolError) {
        try spool.withBookkeeping { db throws(SQLiteError) in try release(id: id, db: db) }
    }

    /// Releases claimed scans without counting an attempt, in one transaction: a stop may leave a few requests of
    /// a thousand scans unsent, and one commit each would take seconds of a stop's budget on a loaded box.
    public func release(ids: [String]) throws(SpoolError) {
        guard !ids.isEmpty else { return }
        try spool.withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                for id in ids { try release(id: id, db: db) }
            }
        }
    }

    func release(id: String, db: SQLiteConnection) throws(SQLiteError) {
        let s = try prepare(
            db,
            """
            UPDATE sink_queue SET next_attempt_at = NULL
            WHERE sink = ?9 AND seq = (SELECT seq FROM scans WHERE id = ?1) AND state = 'pending'
            """)
        try s.bind(1, id)
        try s.step()
    }
}

/// The sink's problem, kept for `spool stats` in other processes.
extension DeliveryLedger {
    /// Keeps the sink's current problem (nil: none) for `spool stats` in other processes.
    public func recordProblem(_ reason: String?, now: Date) throws(SpoolError) {
        try spool.withBookkeeping { db throws(SQLiteError) in try recordProblem(reason, now: now, db: db) }
    }

    func recordProblem(_ reason: String?, now: Date, db: SQLiteConnection) throws(SQLiteError) {
        let s = try prepare(db, "UPDATE sinks SET last_error = ?1, last_error_at = ?2 WHERE name = ?9")
        try s.bind(1, reason)
        try s.bind(2, reason == nil ? nil : Timestamp.format(now))
        try s.step()
    }
}

/// Scans sent in one request, and the request's `Idempotency-Key`: a lone scan's own id, a batch's key
/// (docs/contracts.md, "Batched request").
public struct DeliveryBatch: Sendable, Equatable {
    public var key: String
    public var records: [ScanRecord]

    public init(key: String, records: [ScanRecord]) {
        self.key = key
        self.records = records
    }
}

/// What one request's answer leaves on one of its scans.
public enum AttemptRecord: Sendable, Equatable {
    /// An outcome that counts as an attempt.
    case outcome(RecordedOutcome)
    /// Delivery paused (a refused token, a redirect): the attempt is not counted, the scan is due for the probe.
    case paused(reason: String)
    /// Not sent after all (shutdown, a refused batch): the lease is given back, no attempt counted.
    case released
}

/// What a delivery attempt leaves on a scan.
public enum RecordedOutcome: Sendable, Equatable {
    case delivered(response: String)
    case dead(reason: String, response: String?)
    case retry(reason: String, nextAttempt: Date)
}
