import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import Spool

/// The delivery ledger is kept by sink name (schema 9): claims, leases, per-scan backoff, attempts, batches and
/// counts of one sink's queue leave every other sink's alone, the API's included. What each sink may send and when
/// follows docs/contracts.md, "Delivery order" (a later scan of an identifier never overtakes an earlier one) and
/// "Batched request" (a request without an answer goes again with the same members under the same key).
@Suite(.serialized)
struct DeliveryLedgerTests {
    /// Scans of these identifiers, one second apart (as `SpoolBatchTests` makes them).
    func scans(_ identifiers: [String]) -> [NewScan] { SpoolBatchTests().scans(identifiers) }

    /// A webhook is sent every accepted read, recognized or not (docs/contracts.md, "Webhook request"). A read
    /// without an identifier waits behind no other scan, also when the oldest pending scans hold too few heads and
    /// they are found through the identifier index (300 scans of one identifier fill the first window).
    @Test func readsWithoutAnIdentifierAreHeadsOfTheirOwn() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try spool.registerSink("hook")
        let same = scans(Array(repeating: "A", count: 300))
        let builder = ScanBuilder(parser: PlingsURLParser())
        let unrecognized = (0..<2).map { n in
            builder.build(
                Read(
                    sourceKind: .manual, device: "t", raw: "hello \(n)",
                    time: Date(timeIntervalSince1970: 1_781_500_000)),
                fix: nil)
        }
        #expect(unrecognized.allSatisfy { $0.state == .unrecognized })
        try spool.insert(same + unrecognized)
        let hook = spool.ledger("hook")
        let now = Date()
        let batch = try #require(try hook.claimBatches(now: now, lease: 30, batches: 1, batchSize: 5, busy: []).first)
        #expect(batch.records.map(\.id) == [same[0].id] + unrecognized.map(\.id))
        // Each backs off; the sink's next wake-up is the earliest of their backoffs.
        let times = [now.addingTimeInterval(30), now.addingTimeInterval(20), now.addingTimeInterval(10)]
        try hook.recordAttempts(
            batch: batch.key,
            zip(batch.records, times).map { ($0.id, .outcome(.retry(reason: "HTTP 503", nextAttempt: $1))) },
            keepBatch: false, now: now)
        let next = try #require(try hook.nextDueTime(now: now))
        #expect(abs(next.timeIntervalSince(times[2])) < 0.001)
        // The API is queued recognized reads only.
        #expect(try spool.api.claimDeliverable(now: now, lease: 30, limit: 5, busy: []).map(\.id) == [same[0].id])
    }

    /// A capture-order sink (MQTT: a subscriber sees the reads in the order they were read) claims the oldest
    /// pending scans whatever their identifier, passes over those in flight, never claims past a scan waiting out
    /// its backoff (nothing may overtake it), and reads on from a position it was given.
    @Test func captureOrderClaimsNeverOvertakeAWaitingScan() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try spool.registerSink("broker")
        let all = scans(["A", "B", "A", "C", "B"])
        try spool.insert(all)
        let broker = spool.ledger("broker")
        let now = Date()
        let first = try broker.claimInCaptureOrder(now: now, afterSeq: 0, limit: 2, busy: [])
        #expect(first.map(\.record.id) == [all[0].id, all[1].id])
        // Two in flight: the next claim passes over them, in capture order across identifiers (A after B).
        let next = try broker.claimInCaptureOrder(now: now, afterSeq: 0, limit: 10, busy: [all[0].id, all[1].id])
        #expect(next.map(\.record.id) == Array(all[2...].map(\.id)))
        // From a position: only what lies after it.
        let after = try broker.claimInCaptureOrder(now: now, afterSeq: first[1].seq, limit: 10, busy: [])
        #expect(after.map(\.record.id) == Array(all[2...].map(\.id)))
        // The first scan backs off: nothing is claimed behind it until it is due, and then it comes first.
        try broker.recordAttempts(
            batch: all[0].id, [(all[0].id, .outcome(.retry(reason: "connection lost", nextAttempt: now + 30)))],
            keepBatch: false, now: now)
        try broker.recordOutcome(id: all[1].id, outcome: .delivered(response: ""), now: now)
        #expect(try broker.claimInCaptureOrder(now: now, afterSeq: 0, limit: 10, busy: []).isEmpty)
        let due = try #require(try broker.nextDueInCaptureOrder(now: now, busy: []))
        #expect(abs(due.timeIntervalSince(now + 30)) < 0.001)
        let later = try broker.claimInCaptureOrder(now: now + 31, afterSeq: 0, limit: 10, busy: [])
        #expect(later.map(\.record.id) == [all[0].id] + all[2...].map(\.id))
    }

    @Test func aSecondSinkKeepsALedgerOfItsOwnBesideTheAPIs() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try spool.registerSink("relay")
        let all = scans(["A", "B", "A"])
        try spool.insert(all)
        let (firstA, b, secondA) = (all[0].id, all[1].id, all[2].id)
        let relay = spool.ledger("relay")
        let now = Date()

        // Both sinks claim the same heads (the second A waits behind the first), each in a batch of its own.
        let relayBatch = try #require(
            try relay.claimBatches(now: now, lease: 30, batches: 1, batchSize: 2, busy: []).first)
        #expect(relayBatch.records.map(\.id) == [firstA, b])
        let apiBatch = try #require(
            try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 2, busy: []).first)
        #expect(apiBatch.records.map(\.id) == [firstA, b])
        #expect(apiBatch.key != relayBatch.key)

        // The relay's answer: the first A taken, B to be retried in a minute. The API's state (the scan's state in
        // the contract) does not move.
        let later = now.addingTimeInterval(60)
        try relay.recordAttempts(
            batch: relayBatch.key,
            [
                (firstA, .outcome(.delivered(response: "{}"))),
                (b, .outcome(.retry(reason: "503 Service Unavailable", nextAttempt: later))),
            ], keepBatch: false, now: now)
        let record = try #require(try spool.record(id: firstA))
        #expect(record.state == .pending && record.attempts == 0 && record.deliveredAt == nil)
        #expect(try spool.stats().counts == [.pending: 3])
        let relayStats = try #require(try spool.sinkStats(named: "relay"))
        #expect(relayStats.delivered == 1 && relayStats.pending == 2)

        // For the relay the second A is now the head of A and due; B backs off. For the API nothing is due: both
        // heads are leased, and the second A waits behind the first.
        #expect(try relay.claimDeliverable(now: now, lease: 30, limit: 5, busy: []).map(\.id) == [secondA])
        #expect(try spool.api.claimDeliverable(now: now, lease: 30, limit: 5, busy: []).isEmpty)
        try relay.recordOutcome(id: secondA, outcome: .delivered(response: "{}"), now: now)
        // What the relay waits for now is B's backoff alone.
        #expect(try relay.nextDueTime(now: now).map { abs($0.timeIntervalSince(later)) < 0.001 } == true)

        // The API's request got no answer: past its lease it goes again as it was, under its key.
        let again = try spool.api.claimBatches(
            now: now.addingTimeInterval(31), lease: 30, batches: 5, batchSize: 2, busy: [])
        #expect(again.map(\.key) == [apiBatch.key] && again.first?.records.map(\.id) == [firstA, b])
        try spool.api.recordAttempts(
            batch: apiBatch.key,
            [(firstA, .outcome(.delivered(response: "{}"))), (b, .outcome(.delivered(response: "{}")))],
            keepBatch: false, now: now)
        // A scan's state is its sinks' (schema 10): the first A is delivered by both; the second A is still owed to
        // the API, B to the relay.
        #expect(try spool.stats().counts == [.pending: 2, .delivered: 1])
        // The relay's backoff on B is its own.
        #expect(try relay.claimDeliverable(now: now.addingTimeInterval(31), lease: 30, limit: 5, busy: []).isEmpty)
        #expect(try relay.claimDeliverable(now: later, lease: 30, limit: 5, busy: []).map(\.id) == [b])
    }

    /// A spool of the release before (schema 8) with a batch of the API's awaiting its answer: after the migration
    /// the batch is the API's and goes again with the same members under the same key; every state is kept.
    @Test func aBatchInProgressOfASchema8SpoolStaysTheAPIs() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("v8.sqlite")
        let all = scans(["A", "B", "C"])
        do {
            let db = try SQLiteConnection(path: path)
            for step in 0..<8 { try db.execute(Schema.migrations[step]) }
            try db.execute("PRAGMA user_version = 8")
            for scan in all {
                let input = #"{"type":"q","identifier":"\#(scan.identifier ?? "")","path":"1"}"#
                try db.execute(
                    """
                    INSERT INTO scans (id, created_at, state, source_kind, device, raw, input, identifier, attempts)
                    VALUES ('\(scan.id)', '2026-06-01T10:00:00.000Z', 'pending', 'manual', 't', 'u', '\(input)',
                            '\(scan.identifier ?? "")', 0)
                    """)
            }
            // A and B were sent together under key K, with a lease that has run out; C was delivered.
            try db.execute(
                """
                INSERT INTO batch_members (scan_id, batch, size) VALUES ('\(all[0].id)', 'K', 2), ('\(all[1].id)', 'K', 2);
                UPDATE sink_queue SET next_attempt_at = '2026-06-01T10:00:30.000Z'
                    WHERE sink = 'api' AND seq IN (SELECT seq FROM scans WHERE id IN ('\(all[0].id)', '\(all[1].id)'));
                UPDATE sink_queue SET state = 'delivered', attempts = 1, delivered_at = '2026-06-01T10:00:01.000Z'
                    WHERE sink = 'api' AND seq = (SELECT seq FROM scans WHERE id = '\(all[2].id)');
                """)
        }
        let spool = try Spool(path: path)
        #expect(spool.migration?.from == 8 && spool.migration?.to == Schema.currentVersion)
        #expect(try spool.stats().counts == [.pending: 2, .delivered: 1])
        let delivered = try #require(try spool.record(id: all[2].id))
        #expect(delivered.state == .delivered && delivered.attempts == 1)
        let now = try #require(Timestamp.parse("2026-06-01T10:01:00.000Z"))
        let again = try spool.api.claimBatches(now: now, lease: 30, batches: 5, batchSize: 5, busy: [])
        #expect(again.map(\.key) == ["K"] && again.first?.records.map(\.id) == [all[0].id, all[1].id])
        var owners: [String] = []
        try spool.withTestConnection { db throws(SQLiteError) in
            let s = try db.prepare("SELECT DISTINCT sink FROM batch_members")
            while try s.step() { owners.append(s.string(0) ?? "") }
        }
        #expect(owners == ["api"])
    }
}
