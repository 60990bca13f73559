import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import Spool

/// A queue sink's claims and outcomes (`claimForSink`, `recordSinkAttempt`) on a real spool, read back with SQL.
struct SinkQueueAttemptsTests {
    struct Rig {
        let dir = TemporaryDirectory("sinkq")
        let spool: Spool
        let ids: [String]
        var path: String { dir.file("spool.sqlite") }

        init(scans: Int) throws {
            spool = try Spool(path: dir.file("spool.sqlite"))
            try spool.registerSink("hook")
            let builder = ScanBuilder(parser: PlingsURLParser())
            var ids: [String] = []
            for n in 0..<scans {
                let raw =
                    n == 1 ? "not a plings code" : "https://s.plings.io/?t=q&i=Sq\(["a", "b", "c", "d", "e"][n])&p=1"
                let scan = builder.build(Read(sourceKind: .manual, device: "t", raw: raw, time: Date()), fix: nil)
                try spool.insert([scan])
                ids.append(scan.id)
            }
            self.ids = ids
        }

        /// The sink's queue row of scan `index`: state, attempts, last error, next attempt.
        func row(_ index: Int) throws -> (state: String, attempts: Int, error: String?, next: String?) {
            let db = try SQLiteConnection(path: path)
            let s = try db.prepare(
                """
                SELECT q.state, q.attempts, q.last_error, q.next_attempt_at FROM sink_queue AS q
                JOIN scans ON scans.seq = q.seq WHERE q.sink = 'hook' AND scans.id = ?1
                """)
            try s.bind(1, ids[index])
            guard try s.step() else { throw RigError("no queue row") }
            return (s.string(0) ?? "", s.int(1), s.string(2), s.string(3))
        }
    }

    /// A request whose answer never came (its process died: the lease ran out; or it was abandoned at a stop) goes
    /// again as it was, although newer scans wait and there is room for them: the next claim takes only the scans
    /// claimed with it, so a repeat carries the same Idempotency-Key (docs/contracts.md, "Webhook request").
    @Test func anUnansweredRequestGoesAgainAsItWas() throws {
        let rig = try Rig(scans: 5)
        defer { rig.dir.remove() }
        let now = Date()
        let first = try rig.spool.claimForSink("hook", now: now, lease: 15, limit: 2)
        #expect(first.map(\.record.id) == Array(rig.ids[0..<2]))
        // The process died: after the lease, the same two, not five.
        let later = now.addingTimeInterval(16)
        let again = try rig.spool.claimForSink("hook", now: later, lease: 15, limit: 5)
        #expect(again.map(\.record.id) == Array(rig.ids[0..<2]))
        // Abandoned at a stop: due at once, still together.
        try rig.spool.recordSinkAttempt("hook", seqs: again.map(\.seq), .abandoned, now: later)
        #expect(try rig.row(0).attempts == 0 && rig.row(0).next != nil)
        let third = try rig.spool.claimForSink("hook", now: later, lease: 15, limit: 5)
        #expect(third.map(\.record.id) == Array(rig.ids[0..<2]))
        try rig.spool.recordSinkAttempt("hook", seqs: third.map(\.seq), .delivered, now: later)
        // Then the rest, in one request.
        let rest = try rig.spool.claimForSink("hook", now: later, lease: 15, limit: 5)
        #expect(rest.map(\.record.id) == Array(rig.ids[2..<5]))
    }

    /// Every scan is queued, unrecognized ones too (a webhook gets what `spool export` shows), in capture order;
    /// a leased scan is not claimed again until its lease ends.
    @Test func claimsGoInCaptureOrderAndLeasesHoldUntilTheyEnd() throws {
        let rig = try Rig(scans: 4)
        defer { rig.dir.remove() }
        let now = Date()
        let first = try rig.spool.claimForSink("hook", now: now, lease: 15, limit: 2)
        #expect(first.map(\.record.id) == Array(rig.ids[0..<2]))
        #expect(first[1].record.state == .unrecognized)
        let second = try rig.spool.claimForSink("hook", now: now, lease: 15, limit: 10)
        #expect(second.map(\.record.id) == Array(rig.ids[2..<4]))
        #expect(try rig.spool.claimForSink("hook", now: now.addingTimeInterval(14), lease: 15, limit: 10).isEmpty)
        let after = try rig.spool.claimForSink("hook", now: now.addingTimeInterval(16), lease: 15, limit: 10)
        #expect(after.map(\.record.id) == rig.ids)
        // The API's queue is untouched.
        #expect(try rig.spool.stats().counts[.pending] == 3)
    }

    @Test func eachOutcomeLeavesWhatItSays() throws {
        let rig = try Rig(scans: 5)
        defer { rig.dir.remove() }
        let now = Date()
        let seqs = try rig.spool.claimForSink("hook", now: now, lease: 15, limit: 5).map(\.seq)
        try rig.spool.recordSinkAttempt("hook", seqs: [seqs[0]], .delivered, now: now)
        try rig.spool.recordSinkAttempt("hook", seqs: [seqs[1]], .dead(reason: "HTTP 422: bad"), now: now)
        try rig.spool.recordSinkAttempt("hook", seqs: [seqs[2]], .retry(reason: "HTTP 503"), now: now)
        try rig.spool.recordSinkAttempt("hook", seqs: [seqs[3]], .paused(reason: "HTTP 401"), now: now)
        try rig.spool.recordSinkAttempt("hook", seqs: [seqs[4]], .released, now: now)
        #expect(try rig.row(0) == ("delivered", 1, nil, nil))
        #expect(try rig.row(1) == ("refused", 1, "HTTP 422: bad", nil))
        #expect(try rig.row(2) == ("pending", 1, "HTTP 503", nil))
        #expect(try rig.row(3) == ("pending", 0, "HTTP 401", nil))
        #expect(try rig.row(4) == ("pending", 0, nil, nil))
        let stats = try #require(try rig.spool.sinkStats(named: "hook"))
        #expect((stats.pending, stats.delivered, stats.refused) == (3, 1, 1))
        #expect(stats.lastError == "HTTP 401")
        // Retried, paused and released scans are due again at once, the oldest first.
        let again = try rig.spool.claimForSink("hook", now: now, lease: 15, limit: 5)
        #expect(again.map(\.record.id) == Array(rig.ids[2..<5]))
        // A delivery clears the sink's last error.
        try rig.spool.recordSinkAttempt("hook", seqs: [again[0].seq], .delivered, now: now)
        #expect(try rig.spool.sinkStats(named: "hook")?.lastError == nil)
    }

    /// An operator's action meanwhile wins: an outcome never revives a scan no longer pending.
    @Test func anOutcomeOnlyChangesAPendingRow() throws {
        let rig = try Rig(scans: 1)
        defer { rig.dir.remove() }
        let seq = try #require(try rig.spool.claimForSink("hook", now: Date(), lease: 15, limit: 1).first?.seq)
        try rig.spool.recordSinkAttempt("hook", seqs: [seq], .dead(reason: "HTTP 400"), now: Date())
        try rig.spool.recordSinkAttempt("hook", seqs: [seq], .delivered, now: Date())
        #expect(try rig.row(0) == ("refused", 1, "HTTP 400", nil))
    }
}
