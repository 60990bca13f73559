import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import Spool

/// Batches in the spool (docs/contracts.md, "Batched request"): only heads of different identifiers go together,
/// and a request that got no answer is sent again with the same members under the same key, even after a restart.
@Suite(.serialized)
struct SpoolBatchTests {
    let builder = ScanBuilder(parser: PlingsURLParser())

    func scans(_ identifiers: [String]) -> [NewScan] {
        identifiers.enumerated().map { n, identifier in
            builder.build(
                Read(
                    sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1.\(n)",
                    time: Date(timeIntervalSince1970: 1_781_424_000 + Double(n))),
                fix: nil)
        }
    }

    @Test func aBatchHoldsOneScanPerIdentifierInCaptureOrder() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let all = scans(["A", "B", "A", "C", "D", "E", "B"])
        try spool.insert(all)
        let batches = try spool.api.claimBatches(now: Date(), lease: 30, batches: 2, batchSize: 3, busy: ["E"])
        // Heads only (the second A and B wait), E is busy; A B C in the first, D alone in the second.
        #expect(batches.map { $0.records.map(\.id) } == [[all[0].id, all[1].id, all[3].id], [all[4].id]])
        #expect(batches[0].key != all[0].id && batches[1].key == all[4].id)
        #expect(Set(batches.map(\.key)).count == 2)
    }

    @Test func aBatchWithoutAnAnswerGoesAgainAsItWasAfterARestart() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let all = scans(["A", "B", "C", "D"])
        let now = Date()
        let first: DeliveryBatch
        do {
            let spool = try Spool(path: path)
            try spool.insert(all)
            first = try #require(
                try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 3, busy: []).first)
            #expect(first.records.count == 3)
            // No answer: every member backs off together, the batch kept.
            try spool.api.recordAttempts(
                batch: first.key,
                first.records.map { ($0.id, .outcome(.retry(reason: "timeout", nextAttempt: now))) },
                keepBatch: true, now: now)
        }
        let spool = try Spool(path: path)  // a restart
        let again = try spool.api.claimBatches(
            now: now.addingTimeInterval(1), lease: 30, batches: 5, batchSize: 3, busy: [])
        #expect(again.first?.key == first.key)
        #expect(again.first?.records.map(\.id) == first.records.map(\.id))
        #expect(again.count == 2 && again[1].records.map(\.id) == [all[3].id])
        #expect(again.first?.records.allSatisfy { $0.attempts == 1 } == true)
        // Answered field by field: the batch is gone, and the scan retried goes under a new key next time.
        try spool.api.recordAttempts(
            batch: first.key,
            [
                (first.records[0].id, .outcome(.delivered(response: "{}"))),
                (first.records[1].id, .outcome(.retry(reason: "field", nextAttempt: now))),
                (first.records[2].id, .released),
            ], keepBatch: false, now: now)
        try spool.api.recordAttempts(batch: all[3].id, [(all[3].id, .released)], keepBatch: true, now: now)
        let third = try spool.api.claimBatches(
            now: now.addingTimeInterval(2), lease: 30, batches: 5, batchSize: 3, busy: [])
        // The lone scan sent without an answer goes alone again under its own id; the two answered field by field go
        // together under a new key.
        #expect(third.map { $0.records.map(\.id) } == [[all[3].id], [first.records[1].id, first.records[2].id]])
        #expect(third.first?.key == all[3].id && third.last?.key != first.key)
        #expect(try spool.record(id: first.records[0].id)?.state == .delivered)
    }

    @Test func aBatchThatLostAMemberIsDissolved() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let all = scans(["A", "B", "C"])
        try spool.insert(all)
        let now = Date()
        let first = try #require(
            try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 3, busy: []).first)
        try spool.api.recordAttempts(
            batch: first.key, first.records.map { ($0.id, .outcome(.retry(reason: "503", nextAttempt: now))) },
            keepBatch: true, now: now)
        // An operator's action took B out of the spool: the other two cannot claim to be the request that was sent.
        try spool.withBookkeeping { db throws(SQLiteError) in
            try db.execute("DELETE FROM scans WHERE id = '\(all[1].id)'")
        }
        let again = try spool.api.claimBatches(
            now: now.addingTimeInterval(1), lease: 30, batches: 1, batchSize: 3, busy: [])
        #expect(again.map { $0.records.map(\.id) } == [[all[0].id, all[2].id]])
        #expect(again.first?.key != first.key)
        // A batch size of 1 (the API refused batches) sends a kept batch's scans one by one.
        let lone = scans(["X", "Y"])
        try spool.insert(lone)
        let pair = try #require(
            try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 2, busy: ["A", "C"]).first)
        try spool.api.recordAttempts(
            batch: pair.key, pair.records.map { ($0.id, .released) }, keepBatch: true, now: now)
        let singles = try spool.api.claimBatches(now: now, lease: 30, batches: 5, batchSize: 1, busy: ["A", "C"])
        #expect(singles.map(\.key) == lone.map(\.id))
    }

    /// A scan sent alone whose answer did not come (the soak found such scans delivered twice under two keys) is
    /// sent alone again under its own id, even when other scans are due with it.
    @Test func aLoneScanWithoutAnAnswerIsNeverFoldedIntoABatch() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let all = scans(["A", "B", "C"])
        try spool.insert([all[0]])
        let now = Date()
        let lone = try #require(
            try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 25, busy: []).first)
        #expect(lone.key == all[0].id && lone.records.count == 1)
        try spool.api.recordAttempts(
            batch: lone.key, [(all[0].id, .outcome(.retry(reason: "timeout", nextAttempt: now)))], keepBatch: true,
            now: now)
        try spool.insert([all[1], all[2]])
        let next = try spool.api.claimBatches(
            now: now.addingTimeInterval(1), lease: 30, batches: 5, batchSize: 25, busy: [])
        #expect(next.map(\.key).first == all[0].id)
        #expect(next.map { $0.records.map(\.id) } == [[all[0].id], [all[1].id, all[2].id]])
        // `scan`'s one attempt does not take a scan that `run` sent without an answer.
        #expect(try spool.api.claimIfHead(id: all[0].id, now: now.addingTimeInterval(60), lease: 30) == nil)
    }

    /// A long backlog of one identifier (every scan behind its first is not a head) does not hide the heads of
    /// others behind it, nor the time the next one is due.
    @Test func headsBehindALongBacklogOfOneIdentifierAreFound() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let all = scans(Array(repeating: "A", count: 600) + ["B", "C"])
        try spool.insert(all)
        let now = Date()
        let claimed = try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 5, busy: [])
        #expect(claimed.map { $0.records.map(\.id) } == [[all[0].id, all[600].id, all[601].id]])
        // All three in flight (leased): the next due time is the earliest lease's end.
        let due = try #require(try spool.api.nextDueTime(now: now))
        #expect(abs(due.timeIntervalSince(now) - 30) < 1)
        #expect(try spool.api.claimBatches(now: now, lease: 30, batches: 1, batchSize: 5, busy: []).isEmpty)
    }
}
