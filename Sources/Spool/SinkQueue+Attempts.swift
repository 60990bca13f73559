import BridgeCore
import Foundation

/// What one delivery attempt left on the scans a queue sink sent together (a webhook's request). The API records
/// its own answers per scan (`AttemptRecord`); a queue sink's request succeeds or fails as a whole.
public enum SinkAttempt: Sendable, Equatable {
    /// Taken: the scans leave the sink's queue as delivered.
    case delivered
    /// Refused for good (a 4xx that no retry can change): the scans leave the queue as `refused`, keeping the
    /// reason, so they never block the scans behind them. `spool list` shows them; they are never sent again.
    case dead(reason: String)
    /// Not taken for a reason that may pass (no answer, a 5xx): counted as an attempt, and due again at once; the
    /// sink's own backoff spaces the next attempt.
    case retry(reason: String)
    /// A refusal only a person can fix (a refused token, a redirect): not counted, the reason kept.
    case paused(reason: String)
    /// Not sent after all: the claim is given back, nothing counted.
    case released
    /// Sent, and its answer abandoned (shutdown): nothing counted, and the scans keep a lease that has already run
    /// out, so the next claim, by this process or the next, sends them together again (see `claimForSink`).
    case abandoned
}

/// Claims and outcomes for the sinks that deliver from their own queue with retries (a webhook): the same
/// columns the API's queue rows use (attempts, last error, lease, delivery time), in capture order. The API keeps
/// its per-identifier order and batches of its own (`Spool+Delivery.swift`); MQTT records acknowledgements only
/// (`markSinkDelivered`).
///
/// A claim is the first pending scans of the sink's queue, in capture order, each leased for `lease` seconds
/// (`next_attempt_at`), so a second process never sends them at the same time; a lease still running is skipped.
/// A retried scan is due again at once and stays at the head: order is kept, and the sink's backoff (`SinkHealth`)
/// decides when the next attempt goes. Only leased scans are ever skipped, so a claim reads a few rows past the
/// head of the queue however long it is.
///
/// A lease that ran out at the head of the queue is a request whose answer never came (its process died, or it was
/// abandoned at a stop): the scans claimed together share their lease's time, so the next claim takes those and no
/// others, and the request goes again as it was, under the same Idempotency-Key (docs/contracts.md, "Webhook
/// request"), even after a restart and with newer scans waiting.
extension Spool {
    /// Up to `limit` scans of `sink`'s queue that may be sent now, in capture order, leased until `now + lease`.
    public func claimForSink(_ sink: String, now: Date, lease: Double, limit: Int) throws(SpoolError) -> [SinkItem] {
        guard limit > 0 else { return [] }
        let (due, later) = (Timestamp.format(now), Timestamp.format(now.addingTimeInterval(Spool.longestWait)))
        return try withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                // The head's lease, when it ran out: only the scans claimed with it go now.
                let head = try db.prepare(
                    "SELECT next_attempt_at FROM sink_queue WHERE sink = ?1 AND state = 'pending' ORDER BY seq LIMIT 1")
                try head.bind(1, sink)
                var lapsed: String?
                if try head.step(), let lease = head.string(0), lease <= due || lease > later { lapsed = lease }
                let select = try db.prepare(
                    """
                    SELECT \(Spool.columns), q.seq FROM sink_queue AS q JOIN scans AS s ON s.seq = q.seq
                        \(Spool.recordJoin)
                    WHERE q.sink = ?1 AND q.state = 'pending'
                      AND (q.next_attempt_at IS NULL OR q.next_attempt_at <= ?2 OR q.next_attempt_at > ?3)
                      AND (?5 IS NULL OR q.next_attempt_at = ?5)
                    ORDER BY q.seq LIMIT ?4
                    """)
                try select.bind(1, sink)
                try select.bind(2, due)
                try select.bind(3, later)
                try select.bind(4, limit)
                try select.bind(5, lapsed)
                var items: [SinkItem] = []
                while try select.step() {
                    items.append(SinkItem(seq: select.int(Spool.columnCount), record: Spool.record(select)))
                }
                let leasing = try db.prepare(
                    "UPDATE sink_queue SET next_attempt_at = ?3 WHERE sink = ?1 AND seq = ?2")
                let until = Timestamp.format(now.addingTimeInterval(lease))
                for item in items {
                    try leasing.bind(1, sink)
                    try leasing.bind(2, item.seq)
                    try leasing.bind(3, until)
                    try leasing.step()
                }
                return items
            }
        }
    }

    /// When the earliest lease on `sink`'s queue ends (a claim of a process that died, or of this one still in
    /// flight); nil when no scan is leased. Called when a claim found fewer scans than it wanted: every pending scan
    /// not claimed then is leased, so this reads only those few.
    public func nextLeaseEnd(forSink sink: String) throws(SpoolError) -> Date? {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare(
                "SELECT MIN(next_attempt_at) FROM sink_queue WHERE sink = ?1 AND state = 'pending' AND next_attempt_at IS NOT NULL"
            )
            try s.bind(1, sink)
            guard try s.step(), let text = s.string(0) else { return nil }
            return Timestamp.parse(text)
        }
    }

    /// Records one attempt's result on the scans sent together, in one transaction, with the sink's last error
    /// (cleared by a delivery). Only rows still pending change: an operator's purge or retry meanwhile wins.
    public func recordSinkAttempt(_ sink: String, seqs: [Int], _ attempt: SinkAttempt, now: Date) throws(SpoolError) {
        guard !seqs.isEmpty else { return }
        let at = Timestamp.format(now)
        // ?3: state, ?4: attempts added, ?5: the scan's last error (kept as it was when NULL and ?6 = 0),
        // ?6: 1 to overwrite the error, ?7: the delivery time, ?8: the attempt time (NULL: unchanged).
        let (state, counted, error, delivered): (String, Int, String?, String?)
        switch attempt {
        case .delivered: (state, counted, error, delivered) = ("delivered", 1, nil, at)
        case .dead(let reason): (state, counted, error, delivered) = ("refused", 1, reason, nil)
        case .retry(let reason): (state, counted, error, delivered) = ("pending", 1, reason, nil)
        case .paused(let reason): (state, counted, error, delivered) = ("pending", 0, reason, nil)
        case .released, .abandoned: (state, counted, error, delivered) = ("pending", 0, nil, nil)
        }
        let overwrite = attempt != .released && attempt != .abandoned
        // An abandoned request's scans keep a lease that ends now: they go again together (see `claimForSink`).
        let lease = attempt == .abandoned ? at : nil
        try withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let row = try db.prepare(
                    """
                    UPDATE sink_queue SET state = ?3, attempts = attempts + ?4, next_attempt_at = ?9,
                        last_error = CASE WHEN ?6 THEN ?5 ELSE last_error END, delivered_at = ?7,
                        last_attempt_at = coalesce(?8, last_attempt_at)
                    WHERE sink = ?1 AND seq = ?2 AND state = 'pending'
                    """)
                for seq in seqs {
                    try row.bind(1, sink)
                    try row.bind(2, seq)
                    try row.bind(3, state)
                    try row.bind(4, counted)
                    try row.bind(5, error)
                    try row.bind(6, overwrite ? 1 : 0)
                    try row.bind(7, delivered)
                    try row.bind(8, overwrite ? at : nil)
                    try row.bind(9, lease)
                    try row.step()
                }
                guard overwrite else { return }
                let sinkError = try db.prepare(
                    """
                    UPDATE sinks SET last_error = ?2, last_error_at = ?3
                    WHERE name = ?1 AND last_error IS NOT ?2
                    """)
                try sinkError.bind(1, sink)
                try sinkError.bind(2, error)
                try sinkError.bind(3, error == nil ? nil : at)
                try sinkError.step()
            }
        }
    }
}
