import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import Spool

/// Schema 8 moves the API's delivery state from `scans` into `sink_queue`, where every other sink's is. A spool
/// left by the release before (schema 7) must come out of its first open with every scan and everything delivery
/// knew about it: the expected values below are the ones written into the old columns by hand, as that release
/// wrote them.
@Suite(.serialized)
struct DeliveryModelMigrationTests {
    /// Times as the spool writes them (docs/contracts.md, "Spool record").
    static let captured = "2026-06-01T10:00:00.000Z"
    static let retryAt = "2026-06-01T10:05:00.000Z"
    static let firstTry = "2026-06-01T10:00:01.000Z"
    static let lastTry = "2026-06-01T10:00:09.000Z"
    static let deliveredAt = "2026-06-01T10:00:02.000Z"

    /// A schema-7 spool with a scan in every state, an MQTT queue, and a batch awaiting its answer.
    func olderSpool(_ path: String) throws {
        let db = try SQLiteConnection(path: path)
        for step in 0..<7 { try db.execute(Schema.migrations[step]) }
        try db.execute("PRAGMA user_version = 7")
        try db.execute("INSERT INTO sinks (name) VALUES ('mqtt')")
        func input(_ identifier: String) -> String {
            #"{"type":"q","identifier":"\#(identifier)","path":"1"}"#
        }
        let t = Self.self
        try db.execute(
            """
            INSERT INTO scans (id, created_at, state, source_kind, device, raw, input, identifier, attempts,
                               last_error, next_attempt_at, last_attempt_at, delivered_at, response) VALUES
            ('first-of-A', '\(t.captured)', 'pending', 'hid', 'bench', 'u', '\(input("A"))', 'A', 2,
                '503 Service Unavailable', '\(t.retryAt)', '\(t.firstTry)', NULL, NULL),
            ('second-of-A', '\(t.captured)', 'pending', 'hid', 'bench', 'u', '\(input("A"))', 'A', 0,
                NULL, NULL, NULL, NULL, NULL),
            ('delivered-B', '\(t.captured)', 'delivered', 'nfc', 'ACS', 'u', '\(input("B"))', 'B', 1,
                NULL, NULL, '\(t.firstTry)', '\(t.deliveredAt)', '{"data":{"resolveIdentifier":{"ok":true}}}'),
            ('dead-C', '\(t.captured)', 'dead', 'hid', 'bench', 'u', '\(input("C"))', 'C', 3,
                'the API refused it', NULL, '\(t.lastTry)', NULL, '{"errors":[{"message":"no"}]}'),
            ('not-a-url', '\(t.captured)', 'unrecognized', 'hid', 'bench', 'hello', NULL, NULL, 0,
                'not a URL', NULL, NULL, NULL, NULL),
            ('batched-D', '\(t.captured)', 'pending', 'hid', 'bench', 'u', '\(input("D"))', 'D', 0,
                NULL, NULL, NULL, NULL, NULL);
            UPDATE sink_queue SET state = 'delivered', delivered_at = '\(t.deliveredAt)'
                WHERE seq = (SELECT seq FROM scans WHERE id = 'delivered-B');
            INSERT INTO batch_members (scan_id, batch, size) VALUES ('batched-D', 'batched-D', 1);
            """)
    }

    @Test func aSpoolOfTheReleaseBeforeKeepsEveryScanAndItsDeliveryState() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("v7.sqlite")
        try olderSpool(path)
        let spool = try Spool(path: path)
        #expect(spool.migration?.from == 7 && spool.migration?.to == Schema.currentVersion)

        let first = try #require(try spool.record(id: "first-of-A"))
        #expect(first.state == .pending && first.attempts == 2 && first.lastError == "503 Service Unavailable")
        #expect(first.nextAttemptAt == Timestamp.parse(Self.retryAt) && first.deliveredAt == nil)
        let delivered = try #require(try spool.record(id: "delivered-B"))
        #expect(delivered.state == .delivered && delivered.attempts == 1 && delivered.lastError == nil)
        #expect(delivered.deliveredAt == Timestamp.parse(Self.deliveredAt))
        #expect(delivered.response == #"{"data":{"resolveIdentifier":{"ok":true}}}"#)
        // The API refused it, but MQTT still owes it: the scan is pending (schema 10: a scan's state is its sinks').
        let dead = try #require(try spool.record(id: "dead-C"))
        #expect(dead.state == .pending && dead.attempts == 3 && dead.lastError == "the API refused it")
        #expect(try spool.sinkStates(ids: ["dead-C"]) == ["dead-C": ["api": "refused", "mqtt": "pending"]])
        #expect(dead.response == #"{"errors":[{"message":"no"}]}"#)
        let unrecognized = try #require(try spool.record(id: "not-a-url"))
        #expect(unrecognized.state == .unrecognized && unrecognized.lastError == "not a URL")
        #expect(
            try spool.list().map(\.id) == [
                "first-of-A", "second-of-A", "delivered-B", "dead-C", "not-a-url", "batched-D",
            ])
        #expect(try spool.list(state: .pending).map(\.id) == ["first-of-A", "second-of-A", "dead-C", "batched-D"])
        #expect(try spool.list(state: .dead).isEmpty)
        #expect(try spool.list(state: .dead, sink: Spool.apiSink).map(\.id) == ["dead-C"])
        #expect(
            try spool.list(state: .pending, sink: Spool.apiSink).map(\.id) == [
                "first-of-A", "second-of-A", "batched-D",
            ])
        #expect(try spool.list(state: .unrecognized).map(\.id) == ["not-a-url"])

        let stats = try spool.stats()
        #expect(stats.counts == [.pending: 4, .delivered: 1, .unrecognized: 1])
        // The later of the two recorded errors.
        #expect(stats.lastError == "the API refused it")
        // The MQTT sink's queue is as it was; the API's is listed beside it with what schema 8 moved there.
        let sinks = try spool.sinkStats()
        #expect(sinks.map(\.name) == ["api", "mqtt"])
        #expect(sinks[0].pending == 3 && sinks[0].delivered == 1 && sinks[0].refused == 1)
        #expect(sinks[1].pending == 5 && sinks[1].delivered == 1)
        #expect(
            try spool.sinkStates(ids: ["delivered-B"]) == ["delivered-B": ["api": "delivered", "mqtt": "delivered"]])

        // Delivery goes on where it stood: before the backoff ends only the batch awaiting its answer is sent
        // (again alone, under its own key); the second scan of A waits behind the first.
        let early = Timestamp.parse("2026-06-01T10:01:00.000Z")!
        let batches = try spool.api.claimBatches(now: early, lease: 30, batches: 5, batchSize: 5, busy: [])
        #expect(batches.map(\.key) == ["batched-D"] && batches.flatMap(\.records).map(\.id) == ["batched-D"])
        let later = Timestamp.parse("2026-06-01T10:06:00.000Z")!
        // Past the backoff, and past the batch's lease (its answer never came).
        let due = try spool.api.claimDeliverable(now: later, lease: 30, limit: 5, busy: []).map(\.id)
        #expect(Set(due) == ["first-of-A", "batched-D"] && due.count == 2)
        for id in due { try spool.api.recordOutcome(id: id, outcome: .delivered(response: "{}"), now: later) }
        #expect(try spool.api.claimDeliverable(now: later, lease: 30, limit: 5, busy: []).map(\.id) == ["second-of-A"])
        #expect(try spool.deliveryTotals() == (attempts: 2, failures: 0))

        // The operator's actions act on the moved state.
        #expect(try spool.retry(id: "dead-C"))
        let revived = try #require(try spool.record(id: "dead-C"))
        #expect(revived.state == .pending && revived.attempts == 0)
        #expect(try spool.purgeDelivered(before: later) == 1)
        #expect(try spool.record(id: "delivered-B") == nil)
        // Scans delivered to the API but not yet published to MQTT stay, pending.
        #expect(try spool.record(id: "first-of-A")?.state == .pending)
        #expect(try spool.stats().counts == [.pending: 4, .unrecognized: 1])
    }

    /// After the migration a new read is queued for the API only when it has something to send.
    @Test func newScansAreQueuedForTheAPIOnlyWhenRecognized() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("v7.sqlite")
        try olderSpool(path)
        let spool = try Spool(path: path)
        let recognized = SpoolTests().scan("https://s.plings.io/?t=q&i=New&p=1")
        let unrecognized = SpoolTests().scan("plain text")
        try spool.insert([recognized, unrecognized])
        var queued: [String: [String]] = [:]
        try spool.withTestConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                SELECT s.id, q.sink FROM sink_queue AS q JOIN scans AS s ON s.seq = q.seq
                WHERE s.id IN (?1, ?2) ORDER BY q.sink
                """)
            try s.bind(1, recognized.id)
            try s.bind(2, unrecognized.id)
            while try s.step() { queued[s.string(0) ?? "", default: []].append(s.string(1) ?? "") }
        }
        #expect(queued[recognized.id] == ["api", "mqtt"])
        #expect(queued[unrecognized.id] == ["mqtt"])
        #expect(try spool.record(id: recognized.id)?.state == .pending)
        #expect(try spool.record(id: unrecognized.id)?.state == .unrecognized)
    }

    /// A migration interrupted before its commit leaves the release before's spool whole: the same open again
    /// (the next start) migrates it. The step runs in one transaction with the version (`Spool.migrate`); here the
    /// transaction is made to fail after its bulk copy, as a full disk would.
    @Test func aMigrationThatFailsLeavesTheOlderSpoolWhole() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("v7.sqlite")
        try olderSpool(path)
        do {
            let db = try SQLiteConnection(path: path)
            // Fails the step after its bulk copy, when the API's counts are written.
            try db.execute(
                "CREATE TRIGGER fail_step AFTER INSERT ON sink_counts BEGIN SELECT RAISE(ABORT, 'disk full'); END")
        }
        #expect(throws: SpoolError.self) { try Spool(path: path) }
        do {
            let db = try SQLiteConnection(path: path)
            #expect(try db.scalarInt("PRAGMA user_version") == 7)
            #expect(try db.scalarInt("SELECT count(*) FROM sinks WHERE name = 'api'") == 0)
            #expect(try db.scalarInt("SELECT count(*) FROM scans") == 6)
            try db.execute("DROP TRIGGER fail_step")
        }
        let spool = try Spool(path: path)
        #expect(spool.migration?.from == 7)
        #expect(try spool.stats().counts == [.pending: 4, .delivered: 1, .unrecognized: 1])
    }
}
