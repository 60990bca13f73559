import BridgeCore
import Foundation

/// One scan queued for a sink, with its capture position.
public struct SinkItem: Sendable, Equatable {
    public var seq: Int
    public var record: ScanRecord
}

/// A sink's delivery state as the spool records it (`spool stats`, `status`).
public struct SinkStats: Sendable, Equatable {
    public var name: String
    public var enabled: Bool
    public var pending: Int
    public var delivered: Int
    /// Scans the sink refused for good (too large for the broker, a webhook's 4xx): never sent again.
    public var refused: Int = 0
    /// Seconds since the oldest scan still queued for the sink was captured; nil when none is.
    public var oldestPendingAge: Double?
    /// The sink's last recorded problem (cleared when it delivers again).
    public var lastError: String?

    public func json() -> JSONValue {
        .object([
            ("enabled", .bool(enabled)), ("pending", .integer(pending)), ("delivered", .integer(delivered)),
            ("refused", .integer(refused)),
            ("oldestPendingAge", oldestPendingAge.map { .number(($0 * 1000).rounded() / 1000) } ?? .null),
            ("lastError", lastError.map(JSONValue.string) ?? .null),
        ])
    }
}

/// Delivery state per sink (schema 3; the API's too since schema 8): each sink has its own queue of scans, so the
/// API and (say) an MQTT broker progress independently, and a scan's state is theirs together (schema 10). The
/// queued sinks' ledger (claims, leases, batches, outcomes) is `Spool+Delivery.swift`; MQTT's acknowledgements are
/// here.
extension Spool {
    /// Makes `name` receive every scan committed from now on (by this or any other process). Scans already in
    /// the spool are not queued: enabling a sink does not replay history. Idempotent.
    public func registerSink(_ name: String) throws(SpoolError) {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                "INSERT INTO sinks (name, enabled) VALUES (?1, 1) ON CONFLICT (name) DO UPDATE SET enabled = 1")
            try s.bind(1, name)
            try s.step()
        }
        registered.withLock { $0[name] = true }
    }

    /// Stops queueing new scans for `name` (its configuration was removed). What is already queued stays, so
    /// enabling it again resumes where it left off; meanwhile the sink owes nothing (schema 10): a scan only it
    /// still owed is settled by the other sinks' states, or kept, and the retention treats it so.
    public func disableSink(_ name: String) throws(SpoolError) {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare("UPDATE sinks SET enabled = 0 WHERE name = ?1")
            try s.bind(1, name)
            try s.step()
        }
        registered.withLock { $0[name] = false }
    }

    /// Up to `limit` scans queued for `sink` after capture position `afterSeq`, in capture order.
    public func pendingForSink(_ sink: String, afterSeq: Int, limit: Int) throws(SpoolError) -> [SinkItem] {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                SELECT \(Spool.columns), q.seq FROM sink_queue AS q JOIN scans AS s ON s.seq = q.seq
                    \(Spool.recordJoin)
                WHERE q.sink = ?1 AND q.state = 'pending' AND q.seq > ?2 ORDER BY q.seq LIMIT ?3
                """)
            try s.bind(1, sink)
            try s.bind(2, afterSeq)
            try s.bind(3, limit)
            var items: [SinkItem] = []
            while try s.step() { items.append(SinkItem(seq: s.int(Spool.columnCount), record: Spool.record(s))) }
            return items
        }
    }

    /// Records that the sink acknowledged these scans (one transaction), and clears the sink's last error.
    public func markSinkDelivered(_ sink: String, seqs: [Int], now: Date) throws(SpoolError) {
        guard !seqs.isEmpty else { return }
        try withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let s = try db.prepare(
                    "UPDATE sink_queue SET state = 'delivered', delivered_at = ?3 WHERE sink = ?1 AND seq = ?2")
                let at = Timestamp.format(now)
                for seq in seqs {
                    try s.bind(1, sink)
                    try s.bind(2, seq)
                    try s.bind(3, at)
                    try s.step()
                }
                let clear = try db.prepare(
                    "UPDATE sinks SET last_error = NULL WHERE name = ?1 AND last_error IS NOT NULL")
                try clear.bind(1, sink)
                try clear.step()
            }
        }
    }

    /// Keeps the sink's current problem (nil: none) for `spool stats` in other processes.
    public func recordSinkError(_ sink: String, _ reason: String?, now: Date) throws(SpoolError) {
        try withBookkeeping { db throws(SQLiteError) in
            let s = try db.prepare("UPDATE sinks SET last_error = ?2, last_error_at = ?3 WHERE name = ?1")
            try s.bind(1, sink)
            try s.bind(2, reason)
            try s.bind(3, reason == nil ? nil : Timestamp.format(now))
            try s.step()
        }
    }

    /// One registered sink's counts; nil when no sink of that name is registered.
    public func sinkStats(named name: String) throws(SpoolError) -> SinkStats? {
        try sinkStats(only: name).first
    }

    /// Every registered sink's counts (or only those of the sink `only` names).
    public func sinkStats(now: Date = Date(), only: String? = nil) throws(SpoolError) -> [SinkStats] {
        try withConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                SELECT k.name, k.enabled, k.last_error,
                    (SELECT COUNT(*) FROM sink_queue AS q WHERE q.sink = k.name AND q.state = 'pending'),
                    (SELECT coalesce(sum(n), 0) FROM sink_counts AS c WHERE c.sink = k.name AND c.state = 'delivered'),
                    (SELECT MIN(scans.created_at) FROM sink_queue AS q JOIN scans ON scans.seq = q.seq
                        WHERE q.sink = k.name AND q.state = 'pending'),
                    (SELECT coalesce(sum(n), 0) FROM sink_counts AS c WHERE c.sink = k.name AND c.state = 'refused')
                FROM sinks AS k WHERE ?1 IS NULL OR k.name = ?1 ORDER BY k.name
                """)
            try s.bind(1, only)
            var result: [SinkStats] = []
            while try s.step() {
                let oldest = s.string(5).flatMap(Timestamp.parse).map { max(0, now.timeIntervalSince($0)) }
                result.append(
                    SinkStats(
                        name: s.string(0) ?? "", enabled: s.int(1) != 0, pending: s.int(3), delivered: s.int(4),
                        refused: s.int(6), oldestPendingAge: oldest, lastError: s.string(2)))
            }
            return result
        }
    }

    /// The sink states of the given scans (`spool list`): scan id -> sink -> `pending`, `delivered` or `refused`. A
    /// scan committed before a sink was registered, or while it was disabled, has no entry for it.
    public func sinkStates(ids: [String]) throws(SpoolError) -> [String: [String: String]] {
        guard !ids.isEmpty else { return [:] }
        return try withConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                SELECT scans.id, q.sink, q.state FROM sink_queue AS q JOIN scans ON scans.seq = q.seq
                WHERE scans.id IN (SELECT value FROM json_each(?1))
                """)
            try s.bind(1, JSONValue.array(ids.map { .string($0) }).encoded())
            var states: [String: [String: String]] = [:]
            while try s.step() {
                states[s.string(0) ?? "", default: [:]][s.string(1) ?? ""] = s.string(2)
            }
            return states
        }
    }
}

extension Spool {
    /// The sink can never take this scan (larger than the broker accepts): it leaves the sink's queue as
    /// `refused`, keeping the reason as the sink's last error, so it does not block the scans after it.
    public func markSinkRefused(_ sink: String, seq: Int, reason: String, now: Date) throws(SpoolError) {
        try withBookkeeping { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let s = try db.prepare(
                    "UPDATE sink_queue SET state = 'refused', last_attempt_at = ?3 WHERE sink = ?1 AND seq = ?2")
                try s.bind(1, sink)
                try s.bind(2, seq)
                try s.bind(3, Timestamp.format(now))
                try s.step()
                let e = try db.prepare("UPDATE sinks SET last_error = ?2, last_error_at = ?3 WHERE name = ?1")
                try e.bind(1, sink)
                try e.bind(2, reason)
                try e.bind(3, Timestamp.format(now))
                try e.step()
            }
        }
    }
}
