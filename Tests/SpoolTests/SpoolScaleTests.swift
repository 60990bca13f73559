import BridgeCore
import BridgeTestSupport
import CSQLite
import Foundation
import Platform
import Testing

@testable import Spool

/// A year of scans (issue 22): counts kept by triggers stay exact, a purge goes in bounded batches, and a WAL
/// grown by a big transaction does not stay big. Expected counts come from SQLite's own COUNT(*) over the rows.
@Suite(.serialized)
struct SpoolScaleTests {
    /// A scan read at a fixed time (the helper of `SpoolTests`).
    func scan(_ url: String, at seconds: Double = 0) -> NewScan { SpoolTests().scan(url, at: seconds) }

    /// The counts SQLite finds by counting every row, the authority the trigger-kept counts must equal, by the rule of
    /// docs/contracts.md ("Spool record", issue 56) applied to the raw queue rows: pending while an enabled sink
    /// owes the scan, else dead when a sink refused it, delivered when one took it, kept when none queued it; an
    /// unrecognized read stays so.
    func counted(_ spool: Spool) throws -> [ScanState: Int] {
        var counts: [ScanState: Int] = [:]
        try spool.withTestConnection { db throws(SQLiteError) in
            let s = try db.prepare(
                """
                SELECT CASE WHEN s.state = 'unrecognized' THEN 'unrecognized'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q JOIN sinks AS k ON k.name = q.sink
                        WHERE q.seq = s.seq AND q.state = 'pending' AND k.enabled = 1) THEN 'pending'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = s.seq AND q.state = 'refused') THEN 'dead'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = s.seq AND q.state = 'delivered')
                        THEN 'delivered'
                    ELSE 'kept' END, COUNT(*)
                FROM scans AS s GROUP BY 1
                """)
            while try s.step() {
                if let state = s.string(0).flatMap(ScanState.init) { counts[state] = s.int(1) }
            }
        }
        return counts
    }

    func walSize(_ path: String) -> Int {
        var info = stat()
        return stat(path + "-wal", &info) == 0 ? Int(info.st_size) : 0
    }

    @Test func countsFollowEveryChangeOfState() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try spool.registerSink("mqtt")
        // Identifiers are base58: no 0, O, I or l.
        let names = ["A", "B", "C", "D", "E", "F", "G", "H", "J", "K", "M", "N"]
        let scans =
            names.enumerated().map { scan("https://s.plings.io/?t=q&i=Thing\($1)&p=1", at: Double($0)) } + [
                scan("nope")
            ]
        try spool.insert(scans)
        let now = Date(timeIntervalSince1970: 1_781_500_000)
        try spool.api.recordOutcome(id: scans[0].id, outcome: .delivered(response: "{}"), now: now)
        try spool.api.recordOutcome(id: scans[1].id, outcome: .delivered(response: "{}"), now: now)
        try spool.api.recordOutcome(id: scans[2].id, outcome: .dead(reason: "bad", response: nil), now: now)
        try spool.api.recordOutcome(
            id: scans[3].id, outcome: .retry(reason: "503", nextAttempt: now.addingTimeInterval(5)), now: now)
        #expect(try spool.stats().counts == (try counted(spool)))
        let counts = try spool.stats().counts
        let totals = try spool.deliveryTotals()
        // MQTT still owes every scan: all are pending, whatever the API did.
        #expect(counts == [.pending: 12, .unrecognized: 1], "\(counts) \(totals)")
        // Four recorded attempts, one of which left its scan pending.
        #expect(try spool.deliveryTotals() == (attempts: 4, failures: 1))
        #expect(try spool.retryDead() == 1)
        #expect(try spool.stats().counts == (try counted(spool)))
        // The MQTT sink's queue: 13 queued, 3 published; the purge below removes what both sinks are done with.
        for record in try spool.list(state: .pending, sink: "mqtt", limit: 3) {
            try spool.ledger("mqtt").recordOutcome(id: record.id, outcome: .delivered(response: ""), now: now)
        }
        let sink = try #require(try spool.sinkStats().first { $0.name == "mqtt" })
        #expect(sink.pending == 10 && sink.delivered == 3)
        #expect(try spool.stats().counts == [.pending: 10, .delivered: 2, .unrecognized: 1])
        #expect(try spool.purgeDelivered(before: now.addingTimeInterval(1)) == 2)
        #expect(try spool.stats().counts == (try counted(spool)))
        let after = try #require(try spool.sinkStats().first { $0.name == "mqtt" })
        #expect(after.pending == 10 && after.delivered == 1)
        // A retry resets `attempts`: the counters never go down.
        #expect(try spool.deliveryTotals() == (attempts: 4, failures: 1))

        // A sink disabled owes nothing: a scan the API took and only MQTT still owed is delivered; enabled again,
        // MQTT owes it again. With no sink enabled, a new read is kept (the spool its destination).
        try spool.api.recordOutcome(id: scans[4].id, outcome: .delivered(response: "{}"), now: now)
        #expect(try spool.record(id: scans[4].id)?.state == .pending)
        try spool.disableSink("mqtt")
        #expect(try spool.record(id: scans[4].id)?.state == .delivered)
        #expect(try spool.stats().counts == (try counted(spool)))
        try spool.registerSink("mqtt")
        #expect(try spool.record(id: scans[4].id)?.state == .pending)
        try spool.disableSink("mqtt")
        try spool.disableSink(Spool.apiSink)
        let kept = scan("https://s.plings.io/?t=q&i=ThingP&p=1", at: 20)
        try spool.insert([kept])
        #expect(try spool.record(id: kept.id)?.state == .kept)
        #expect(try spool.record(id: scans[5].id)?.state == .kept)  // owed by the API alone, now disabled
        #expect(try spool.stats().counts == (try counted(spool)))
        #expect(try spool.stats().counts[.pending] == nil && spool.stats().oldestPendingAge == nil)
        // Scans 2 and 4, which MQTT took and the API, now off, no longer owes, settled when it went off (now); the
        // kept ones stay.
        #expect(try spool.purgeDelivered(before: Date().addingTimeInterval(1)) == 2)
    }

    /// A spool written by 0.2.0 (schema 3) gains the counts with every row counted, in the migration.
    @Test func theMigrationCountsTheRowsAlreadyThere() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("v3.sqlite")
        do {
            let db = try SQLiteConnection(path: path)
            for step in 0..<3 { try db.execute(Schema.migrations[step]) }
            try db.execute("PRAGMA user_version = 3")
            try db.execute("INSERT INTO sinks (name) VALUES ('mqtt')")
            try db.execute(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
                INSERT INTO scans (id, created_at, state, source_kind, device, raw)
                SELECT 'v3-' || i, '2026-01-01T00:00:00.000Z',
                    CASE i % 4 WHEN 0 THEN 'pending' WHEN 1 THEN 'delivered' WHEN 2 THEN 'dead' ELSE 'unrecognized' END,
                    'hid', 'bench', 'x' FROM n;
                UPDATE sink_queue SET state = 'delivered' WHERE seq % 5 = 0;
                """)
        }
        let spool = try Spool(path: path)
        #expect(spool.migration?.from == 3 && spool.migration?.to == Schema.currentVersion)
        // Schema 8 moved the API's state into its queue as written (pending, delivered, dead by i % 4); schema 10
        // makes each scan's state its sinks': MQTT still owes every scan but those with seq % 5 == 0, so only those
        // (25 of each API state among the 100) take the API's state; the other 300 recognized are pending.
        #expect(try spool.stats().counts == [.pending: 325, .delivered: 25, .dead: 25, .unrecognized: 125])
        func expected(_ i: Int) -> ScanState {
            i % 4 == 3 ? .unrecognized : i % 5 != 0 ? .pending : [ScanState.pending, .delivered, .dead][i % 4]
        }
        #expect(try spool.list().allSatisfy { $0.state == expected(Int($0.id.dropFirst(3))!) })
        #expect(try spool.stats().counts == (try counted(spool)))
        let sink = try #require(try spool.sinkStats().first { $0.name == "mqtt" })
        #expect(sink.pending == 400 && sink.delivered == 100)
        // The retention: the delivered ones were settled when they were delivered (long ago: pruned); the dead ones
        // at the migration, since dead scans were never pruned before: each gets a whole retention to be revived.
        #expect(try spool.purgeDelivered(before: Date().addingTimeInterval(-60)) == 25)
        #expect(try spool.stats().counts == [.pending: 325, .dead: 25, .unrecognized: 125])
    }

    @Test func purgeGoesInBatchesAndLeavesNoLargeWAL() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let spool = try Spool(path: path)
        // 100,000 old delivered scans in one transaction (an import or an old release's purge): the WAL grows past
        // what SQLite's checkpoints keep it at.
        try insertDeliveredIn2025(spool, count: 100_000)
        #expect(walSize(path) > Spool.walTrimBytes)
        let kept = scan("https://s.plings.io/?t=q&i=Kept&p=1")
        try spool.insert([kept])
        var progress: [Int] = []
        let purged = try spool.purgeDelivered(before: Date(timeIntervalSince1970: 1_767_225_600), batch: 500) {
            progress.append($0)
        }
        #expect(purged == 100_000)
        #expect(progress.count == 200 && progress.last == 100_000 && progress == progress.sorted())
        #expect(try spool.list().map(\.id) == [kept.id])
        #expect(try spool.stats().counts == [.pending: 1])
        #expect(walSize(path) < Spool.walTrimBytes, "WAL \(walSize(path)) bytes after the purge")
    }

    /// `count` scans captured and delivered to the API early in 2025, in one transaction (a year-old backlog).
    func insertDeliveredIn2025(_ spool: Spool, count: Int) throws {
        try spool.withTestConnection { db throws(SQLiteError) in
            try db.execute(
                """
                BEGIN;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
                INSERT INTO scans (id, created_at, state, source_kind, device, raw, input, identifier)
                SELECT 'old-' || i, '2025-01-01T00:00:00.000Z', 'pending', 'hid', 'bench',
                    'https://s.plings.io/?t=q&i=Old' || i || '&p=1', '{"type":"q"}', 'Old' || i FROM n;
                UPDATE sink_queue SET state = 'delivered', delivered_at = '2025-01-01T00:00:01.000Z' WHERE sink = 'api';
                COMMIT;
                """)
        }
    }

    /// The service's stop ends a purge between two batches (`SpoolWorkStop`); the next purge deletes the rest.
    @Test func aStoppedPurgeEndsAfterTheBatchInHandAndTheNextGoesOn() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try insertDeliveredIn2025(spool, count: 2000)
        let cutoff = Date(timeIntervalSince1970: 1_767_225_600)
        let stop = SpoolWorkStop()
        // Stopped while the first batch is committed: that batch stays done, no second one starts.
        #expect(try spool.purgeDelivered(before: cutoff, batch: 500, stop: stop) { _ in stop.stop() } == 500)
        #expect(try spool.purgeDelivered(before: cutoff, batch: 500, stop: stop) == 0)
        #expect(try spool.purgeDelivered(before: cutoff, batch: 500) == 1500)
    }

    /// A large WAL left behind (by a process that stopped before trimming it, or an older release) is trimmed by
    /// the next open, so only that one process pays for re-reading it.
    @Test func aLargeWALLeftBehindIsTrimmedOnOpen() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        do {
            let spool = try Spool(path: path)
            try spool.insert([scan("https://s.plings.io/?t=q&i=A&p=1")])
        }
        // An old release: a big transaction, the WAL persisted at its size by its last close.
        do {
            let db = try SQLiteConnection(path: path)
            db.keepWALAllocated()
            try db.execute(
                """
                BEGIN;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
                INSERT INTO scans (id, created_at, state, source_kind, device, raw)
                SELECT 'big-' || i, '2025-01-01T00:00:00.000Z', 'unrecognized', 'hid', 'bench', printf('%0200d', i)
                FROM n;
                COMMIT;
                """)
        }
        #expect(walSize(path) > Spool.walTrimBytes)
        let spool = try Spool(path: path)
        #expect(walSize(path) < Spool.walTrimBytes)
        #expect(try spool.stats().counts == [.pending: 1, .unrecognized: 100_000])
    }

    /// A commit blocked by another connection's write lock waits for it (up to the busy timeout) and gets in as
    /// soon as the lock is free, not on a later retry.
    @Test func aCommitWaitsForAnotherWritersLock() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let spool = try Spool(path: path)
        let other = try SQLiteConnection(path: path)
        try other.execute("BEGIN IMMEDIATE")
        let released = Collector<Double>()
        let holder = Thread {
            usleep(300_000)
            try? other.execute("COMMIT")
            released.append(MonotonicClock.now())
        }
        let start = MonotonicClock.now()
        holder.start()
        try spool.insert([scan("https://s.plings.io/?t=q&i=Wait&p=1")])
        let committed = MonotonicClock.now()
        #expect(released.wait(count: 1, timeout: 5))
        let freed = try #require(released.all.first)
        #expect(committed - start >= 0.25, "it waited for the lock")
        #expect(committed - freed < 0.05, "in \(committed - freed) s after the lock was freed")
    }
}
