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

/// The sinks' queues as a whole (schema 3; the API's too since schema 8): each sink has its own queue of scans, so
/// the API and (say) an MQTT broker progress independently, and a scan's state is theirs together (schema 10).
/// Here: which sinks are fed, and their counts. What a sink does with its queue (claims, leases, batches,
/// outcomes, acknowledgements) is its `DeliveryLedger` (`Spool+Delivery.swift`), the one queue API by sink name.
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
