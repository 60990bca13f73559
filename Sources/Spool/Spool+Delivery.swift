import BridgeCore
import Foundation

/// Delivery's bookkeeping on the spool: claiming the scans that may be sent now (with a lease), recording each
/// attempt's outcome, and the forwarder's next wake-up. It runs on the `bookkeeping` connection
/// (`synchronous=NORMAL`, see `Spool`); accepting scans and operator actions are in Spool.swift.
extension Spool {
    /// The longest wait the forwarder ever sets on a scan: a `Retry-After` (capped at one hour) or a lease (the
    /// request timeout plus 5 s), with room to spare. A `next_attempt_at` further ahead than this was written
    /// before the wall clock was stepped back (a box booting without a real-time clock, then NTP): such a scan
    /// is due now, or it would wait for as long as the step.
    public static let longestWait: Double = 2 * 3600

    /// The SQL condition "due at ?1", where ?3 is ?1 + `longestWait` (see there).
    static let dueCondition =
        "(s.next_attempt_at IS NULL OR s.next_attempt_at <= ?1 OR s.next_attempt_at > ?3)"

    /// The SQL condition "`s` heads its identifier": no pending scan of the same identifier was captured before
    /// it (docs/contracts.md, "Delivery order"). Only a head may be sent, so a later scan of an identifier never
    /// overtakes an earlier one. `s` is the scans row being tested.
    static let headOfIdentifier = """
        NOT EXISTS (SELECT 1 FROM scans AS e WHERE e.state = 'pending'
                    AND e.identifier = s.identifier AND e.seq < s.seq)
        """

    /// Claims up to `limit` scans that may be sent now: pending, due, and the oldest pending scan of their
    /// identifier (so a later scan never overtakes an earlier one), skipping identifiers in `busy`.
    ///
    /// Claiming moves `next_attempt_at` forward by `lease`, so another process (a `scan` command, a second
    /// service by mistake) does not send the same scan at the same time; if we die, the lease runs out and the
    /// scan is retried. Delivery stays at-least-once: the idempotency key covers a retry after a lost answer.
    public func claimDeliverable(now: Date, lease: Double, limit: Int, busy: Set<String>) throws(SpoolError)
        -> [ScanRecord]
    {
        try withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let select = try db.prepare(
                    """
                    SELECT \(Spool.columns) FROM scans AS s
                    WHERE s.state = 'pending' AND s.input IS NOT NULL
                      AND \(Spool.dueCondition)
                      AND \(Spool.headOfIdentifier)
                    ORDER BY s.seq LIMIT ?2
                    """)
                try select.bind(1, Timestamp.format(now))
                try select.bind(2, limit + busy.count)
                try select.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
                var claimed: [ScanRecord] = []
                while try select.step() {
                    let record = Spool.record(select)
                    if let identifier = record.identifier, busy.contains(identifier) { continue }
                    if claimed.count < limit { claimed.append(record) }
                }
                let leaseUntil = Timestamp.format(now.addingTimeInterval(lease))
                let update = try db.prepare("UPDATE scans SET next_attempt_at = ?2 WHERE id = ?1")
                for record in claimed {
                    try update.bind(1, record.id)
                    try update.bind(2, leaseUntil)
                    try update.step()
                }
                return claimed
            }
        }
    }

    /// Claims one scan for the `scan` command's single attempt, only if no earlier scan of its identifier is
    /// pending (docs/contracts.md, "Delivery order"). Returns nil when it must be left to `run`.
    public func claimIfHead(id: String, now: Date, lease: Double) throws(SpoolError) -> ScanRecord? {
        try withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let select = try db.prepare(
                    """
                    SELECT \(Spool.columns) FROM scans AS s
                    WHERE s.id = ?2 AND s.state = 'pending' AND s.input IS NOT NULL
                      AND \(Spool.dueCondition)
                      AND \(Spool.headOfIdentifier)
                    """)
                try select.bind(1, Timestamp.format(now))
                try select.bind(2, id)
                try select.bind(3, Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
                guard try select.step() else { return nil }
                let record = Spool.record(select)
                try select.step()
                let update = try db.prepare("UPDATE scans SET next_attempt_at = ?2 WHERE id = ?1")
                try update.bind(1, id)
                try update.bind(2, Timestamp.format(now.addingTimeInterval(lease)))
                try update.step()
                return record
            }
        }
    }

    /// The earliest time a pending scan that heads its identifier becomes due (scans behind an earlier one of
    /// their identifier wait for it, not for a time), for the forwarder's sleep; nil when none is pending.
    /// A time further ahead of `now` than `longestWait` counts as due (a wall clock stepped back).
    public func nextDueTime(now: Date) throws(SpoolError) -> Date? {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                SELECT MIN(CASE WHEN s.next_attempt_at IS NULL OR s.next_attempt_at > ?1 THEN ''
                                ELSE s.next_attempt_at END) FROM scans AS s
                WHERE s.state = 'pending' AND s.input IS NOT NULL
                  AND \(Spool.headOfIdentifier)
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
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                UPDATE scans SET state = ?2, attempts = attempts + 1, last_error = ?3, next_attempt_at = ?4,
                                 delivered_at = ?5, response = COALESCE(?6, response), last_attempt_at = ?7
                WHERE id = ?1 AND state = 'pending'
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
                try s.bind(2, ScanState.dead.rawValue)
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
    }

    /// Delivery is paused (the API refused our token): the scan stays pending and due, its attempt is not
    /// counted against it, and the reason is kept for `spool stats`.
    public func recordPaused(id: String, reason: String, now: Date) throws(SpoolError) {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                UPDATE scans SET last_error = ?2, next_attempt_at = NULL, last_attempt_at = ?3
                WHERE id = ?1 AND state = 'pending'
                """)
            try s.bind(1, id)
            try s.bind(2, reason)
            try s.bind(3, Timestamp.format(now))
            try s.step()
        }
    }

    /// Makes every pending scan that is backing off due now, except those leased in `except`: the API came
    /// back, so the backlog drains at once instead of each scan waiting out its own backoff.
    @discardableResult
    public func makeBackoffDue(now: Date, except: Set<String>) throws(SpoolError) -> Int {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                UPDATE scans SET next_attempt_at = NULL
                WHERE state = 'pending' AND next_attempt_at > ?1 AND id NOT IN (SELECT value FROM json_each(?2))
                """)
            try s.bind(1, Timestamp.format(now))
            try s.bind(2, JSONValue.array(except.map { .string($0) }).encoded())
            try s.step()
            return db.changes
        }
    }

    /// Releases a claimed scan without counting an attempt (shutdown abandoned the request).
    public func release(id: String) throws(SpoolError) {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare("UPDATE scans SET next_attempt_at = NULL WHERE id = ?1 AND state = 'pending'")
            try s.bind(1, id)
            try s.step()
        }
    }
}

/// What a delivery attempt leaves on a scan.
public enum RecordedOutcome: Sendable, Equatable {
    case delivered(response: String)
    case dead(reason: String, response: String?)
    case retry(reason: String, nextAttempt: Date)
}
