import BridgeCore
import BridgeTestSupport
import CSQLite
import Foundation
import Testing

@testable import Spool

/// The spool against real SQLite files: durability, concurrency between processes, migration.
@Suite(.serialized)
struct SpoolTests {
    let builder = ScanBuilder(parser: PlingsURLParser())

    func scan(_ url: String, at seconds: Double = 0) -> NewScan {
        builder.build(
            Read(
                sourceKind: .manual, device: "t", raw: url, time: Date(timeIntervalSince1970: 1_781_424_000 + seconds)),
            fix: nil)
    }

    @Test func insertsListsAndCounts() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let a = scan("https://s.plings.io/?t=q&i=A&p=1")
        let b = scan("not a url")
        try spool.insert([a, b])
        let all = try spool.list()
        #expect(all.map(\.id) == [a.id, b.id])
        #expect(all[0].state == .pending && all[0].inputJSON == a.inputJSON && all[0].identifier == "A")
        #expect(all[1].state == .unrecognized && all[1].lastError == "not a URL" && all[1].inputJSON == nil)
        let stats = try spool.stats(now: Date(timeIntervalSince1970: 1_781_424_010))
        #expect(stats.counts[.pending] == 1 && stats.counts[.unrecognized] == 1)
        #expect(stats.oldestPendingAge == 10)
        #expect(stats.schemaVersion == Schema.currentVersion)
        #expect(try spool.list(state: .unrecognized).map(\.id) == [b.id])
    }

    @Test func pragmasAreDurableByDefault() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try spool.withTestConnection { db throws(SQLiteError) in
            #expect(try db.scalarInt("PRAGMA user_version") == Schema.currentVersion)
            #expect(try db.scalarInt("PRAGMA synchronous") == 2)  // FULL
            let mode = try db.prepare("PRAGMA journal_mode")
            #expect(try mode.step() && mode.string(0) == "wal")
        }
        let normal = try Spool(path: dir.file("s.sqlite"), synchronous: .normal)
        try normal.withTestConnection { db throws(SQLiteError) in #expect(try db.scalarInt("PRAGMA synchronous") == 1) }
    }

    /// The WAL stays allocated after the last close (commits then rewrite it in place: docs/benchmarks.md), and
    /// the close's checkpoint still leaves the database file complete on its own.
    @Test func walStaysAllocatedAfterCloseAndTheDatabaseFileIsComplete() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let kept = scan("https://s.plings.io/?t=q&i=W&p=1")
        do {
            let spool = try Spool(path: path)
            try spool.insert([kept])
        }
        let walSize = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect((walSize ?? 0) > 0)
        let copy = dir.file("copy.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        #expect(try Spool(path: copy).list().map(\.id) == [kept.id])
    }

    @Test func deliveryClaimsKeepPerIdentifierOrder() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let a1 = scan("https://s.plings.io/?t=q&i=A&p=1", at: 1)
        let b1 = scan("https://s.plings.io/?t=q&i=B&p=1", at: 2)
        let a2 = scan("https://s.plings.io/?t=q&i=A&p=2", at: 3)
        try spool.insert([a1, b1, a2])
        let now = Date()
        let first = try spool.api.claimDeliverable(now: now, lease: 30, limit: 10, busy: [])
        #expect(first.map(\.id) == [a1.id, b1.id])  // a2 waits behind a1
        #expect(try spool.api.claimDeliverable(now: now, lease: 30, limit: 10, busy: []).isEmpty)  // leased
        try spool.api.recordOutcome(
            id: a1.id, outcome: .retry(reason: "HTTP 500", nextAttempt: now.addingTimeInterval(60)), now: now)
        // a1 backs off, a2 still waits behind it.
        #expect(try spool.api.claimDeliverable(now: now, lease: 30, limit: 10, busy: []).isEmpty)
        try spool.api.recordOutcome(id: a1.id, outcome: .delivered(response: "{}"), now: now)
        #expect(try spool.api.claimDeliverable(now: now, lease: 30, limit: 10, busy: []).map(\.id) == [a2.id])
        let record = try #require(try spool.record(id: a1.id))
        #expect(
            record.state == .delivered && record.attempts == 2 && record.deliveredAt != nil && record.response == "{}")
    }

    /// With no sink enabled the spool is the destination (docs/contracts.md, "Spool record"; issue 56): a read is
    /// kept, never pending. Enabling a sink does not replay history; `spool retry --kept` asks for it, and a sink
    /// not enabled yet owes those reads from when it is.
    @Test func keptScansGoToASinkOnlyWhenAsked() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        try spool.disableSink(Spool.apiSink)
        let a = scan("https://s.plings.io/?t=q&i=A&p=1")
        let b = scan("https://s.plings.io/?t=q&i=B&p=1", at: 1)
        let u = scan("junk", at: 2)
        try spool.insert([a, b, u])
        #expect(try spool.record(id: a.id)?.state == .kept && spool.record(id: u.id)?.state == .unrecognized)
        #expect(try spool.stats().counts == [.kept: 2, .unrecognized: 1] && spool.stats().oldestPendingAge == nil)
        #expect(try spool.list(state: .kept).map(\.id) == [a.id, b.id] && spool.list(state: .pending).isEmpty)
        try spool.registerSink("webhook")
        #expect(try spool.record(id: a.id)?.state == .kept)
        #expect(try spool.queueKept(for: Spool.apiSink) == 2)
        #expect(try spool.record(id: a.id)?.state == .kept)  // the API is not enabled yet
        try spool.registerSink(Spool.apiSink)
        #expect(try spool.list(state: .pending).map(\.id) == [a.id, b.id])
        #expect(try spool.sinkStates(ids: [a.id]) == [a.id: ["api": "pending"]])
        #expect(try spool.queueKept() == 0)
    }

    /// The retention follows every sink (docs/contracts.md, "Spool record"; issue 56): a scan is pruned once every
    /// sink that queued it finished it, taken or refused, before the cutoff; an unrecognized read never is.
    @Test func deadScansAreRevivedAndFinishedOnesArePruned() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("s.sqlite"))
        let a = scan("https://s.plings.io/?t=q&i=A&p=1")
        let b = scan("https://s.plings.io/?t=q&i=B&p=1")
        let c = scan("https://s.plings.io/?t=q&i=C&p=1")
        let u = scan("junk")
        try spool.insert([a, b, c, u])
        let old = Date(timeIntervalSinceNow: -30 * 86_400)
        try spool.api.recordOutcome(id: a.id, outcome: .dead(reason: "HTTP 422", response: nil), now: old)
        try spool.api.recordOutcome(id: b.id, outcome: .delivered(response: "{}"), now: old)
        try spool.api.recordOutcome(id: c.id, outcome: .dead(reason: "HTTP 400", response: nil), now: Date())
        #expect(try spool.stats().lastError == "HTTP 400")
        #expect(try spool.purgeDelivered(before: Date(timeIntervalSinceNow: -7 * 86_400)) == 2)
        #expect(try spool.record(id: a.id) == nil && spool.record(id: b.id) == nil)
        #expect(try spool.record(id: u.id)?.state == .unrecognized)  // never pruned
        #expect(try spool.retry(id: c.id))
        #expect(try spool.record(id: c.id)?.state == .pending)
        #expect(try spool.retry(id: u.id) == false)
        try spool.api.recordOutcome(id: c.id, outcome: .dead(reason: "x", response: nil), now: Date())
        #expect(try spool.retryDead() == 1)
    }

    @Test func olderSchemaIsMigratedKeepingRows() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("v1.sqlite")
        // Build a version-1 spool by hand, as an old release would have left it.
        do {
            let db = try SQLiteConnection(path: path)
            try db.execute(Schema.migrations[0])
            try db.execute("PRAGMA user_version = 1")
            try db.execute(
                """
                INSERT INTO scans (id, created_at, state, source_kind, device, raw, input)
                VALUES ('old-1', '2026-01-01T00:00:00.000Z', 'pending', 'nfc', 'ACS', 'https://s.plings.io/?t=n&i=Q&p=1',
                        '{"type":"n","identifier":"Q","path":"1","scanMetadata":{"timestamp":"2026-01-01T00:00:00.000Z"}}')
                """)
        }
        let spool = try Spool(path: path)
        let record = try #require(try spool.record(id: "old-1"))
        #expect(record.identifier == "Q" && record.symbology == nil)
        #expect(try spool.stats().schemaVersion == Schema.currentVersion)
        #expect(try spool.api.claimDeliverable(now: Date(), lease: 10, limit: 5, busy: []).map(\.id) == ["old-1"])
    }

    /// The AIM identifier a HID POS scanner gives is kept beside the read and shown at the top level of the record
    /// (docs/contracts.md, "Spool record"); a read without one shows null.
    @Test func theSymbologyIsKeptBesideTheRead() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("spool.sqlite"))
        let time = Date(timeIntervalSince1970: 1_780_000_000)
        let gs1 = Read(sourceKind: SourceKind("hidpos"), device: "pos", raw: "01\u{1D}10", time: time, symbology: "]C1")
        let plain = Read(sourceKind: SourceKind("hid"), device: "kbd", raw: "x", time: time)
        try spool.insert([
            NewScan(id: "with", read: gs1, verdict: .unrecognized(reason: "not a URL")),
            NewScan(id: "without", read: plain, verdict: .unrecognized(reason: "not a URL")),
        ])
        #expect(try spool.record(id: "with")?.symbology == "]C1")
        #expect(try spool.record(id: "with")?.json()["symbology"] == .string("]C1"))
        #expect(try spool.record(id: "without")?.json()["symbology"] == .null)
        var exported: [String?] = []
        try spool.forEach { exported.append($0.symbology) }
        #expect(exported == ["]C1", nil])
    }

    /// The originality verdict is kept beside the read (schema 7) and shown as true, false or "unknown"
    /// (docs/contracts.md, "Spool record"); a read never checked shows null.
    @Test func theOriginalityVerdictIsKeptBesideTheRead() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("spool.sqlite"))
        let time = Date(timeIntervalSince1970: 1_780_000_000)
        let verdicts: [Originality?] = [.genuine, .notGenuine, .unknown, nil]
        try spool.insert(
            verdicts.enumerated().map { n, genuine in
                NewScan(
                    id: "g\(n)", read: Read(sourceKind: .manual, device: "t", raw: "x", time: time, genuine: genuine),
                    verdict: .unrecognized(reason: "not a URL"))
            })
        let shown = try (0..<4).map { try spool.record(id: "g\($0)")?.json()["genuine"] }
        #expect(shown == [.bool(true), .bool(false), .string("unknown"), .null])
    }

    @Test func newerSchemaIsRefusedClearly() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("future.sqlite")
        do {
            let db = try SQLiteConnection(path: path)
            try db.execute("PRAGMA user_version = 99")
        }
        #expect {
            try Spool(path: path)
        } throws: { error in
            "\(error)".contains("schema version 99 is newer")
        }
    }

    @Test func fullDiskRefusesTheBatchAndKeepsWhatWasCommitted() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let spool = try Spool(path: path)
        let kept = scan("https://s.plings.io/?t=q&i=K&p=1")
        try spool.insert([kept])
        // Cap the file at its current size: the next insert needs a page and must fail with SQLITE_FULL.
        let db = try SQLiteConnection(path: path)
        let pages = try #require(try db.scalarInt("PRAGMA page_count"))
        let big = (0..<200).map { _ in
            scan("https://s.plings.io/?t=q&i=B&p=" + String(repeating: "1.", count: 31) + "1")
        }
        try spool.withTestConnection { db throws(SQLiteError) in try db.execute("PRAGMA max_page_count = \(pages)") }
        var failure: SpoolError?
        do { try spool.insert(big) } catch { failure = error }
        #expect(failure?.isDiskFull == true)
        #expect(failure?.description.hasPrefix("spool disk is full") == true)
        #expect(try spool.list().map(\.id) == [kept.id])
    }

    // MARK: several processes

    @Test func twoWriterProcessesAtOnceLoseNothing() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("shared.sqlite")
        let bench = Products.path("plings-bench")
        let a = try RunningProcess(bench, ["writer", "--spool", path, "--count", "400", "--tag", "a"])
        let b = try RunningProcess(bench, ["writer", "--spool", path, "--count", "400", "--tag", "b"])
        #expect(a.waitForExit(timeout: 60) == 0, "\(a.stderrText)")
        #expect(b.waitForExit(timeout: 60) == 0, "\(b.stderrText)")
        let acknowledged = Set(a.outputLines + b.outputLines)
        #expect(acknowledged.count == 800)
        let stored = Set(try Spool(path: path).list().map(\.id))
        #expect(stored == acknowledged)
    }

    /// A gate box's first boot: the spool's directories do not exist yet. The scans a writer acknowledged must
    /// survive a power cut right after it, on powercutfs (Tests/Rigs/powercut), which drops everything that
    /// was not fsynced, names in directories included (strict fsync(2) semantics).
    @Test func firstScansInANewDirectorySurviveAPowerCut() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let backing = dir.file("backing")
        let mountpoint = dir.file("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        func mount() throws -> RunningProcess {
            let fs = try RunningProcess(
                "/usr/bin/python3", [Products.rig("powercut/powercutfs.py"), backing, mountpoint])
            #expect(fs.waitForLine(timeout: 20) { $0 == "READY" } != nil, "\(fs.stderrText)")
            return fs
        }
        var fs = try mount()
        defer {
            fs.stop()
            _ = try? ProcessRunner.run("/usr/bin/umount", ["-l", mountpoint])
        }
        let path = mountpoint + "/box/state/plings-bridge/spool.sqlite"
        let writer = try RunningProcess(Products.path("plings-bench"), ["writer", "--spool", path, "--count", "20"])
        #expect(writer.waitForExit(timeout: 60) == 0, "\(writer.stderrText)")
        let acknowledged = Set(writer.outputLines.filter { $0.count == 36 })
        #expect(acknowledged.count == 20)
        fs.signal(SIGUSR1)  // the power cut
        #expect(fs.waitForExit(timeout: 20) != nil)
        _ = try ProcessRunner.run("/usr/bin/umount", ["-l", mountpoint])
        fs = try mount()
        let stored = Set(try Spool(path: path).list().map(\.id))
        #expect(acknowledged.isSubset(of: stored), "lost \(acknowledged.subtracting(stored).count) of 20")
    }

    @Test func writerKilledMidBurstLosesNothingAcknowledged() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("killed.sqlite")
        let writer = try RunningProcess(
            Products.path("plings-bench"), ["writer", "--spool", path, "--count", "100000"])
        #expect(writer.waitForLineCount(300, timeout: 60))
        writer.signal(SIGKILL)
        _ = writer.waitForExit(timeout: 10)
        let acknowledged = writer.outputLines.filter { $0.count == 36 }  // a last partial line is not an ack
        #expect(acknowledged.count >= 300)
        let spool = try Spool(path: path)
        let stored = Set(try spool.list().map(\.id))
        #expect(Set(acknowledged).isSubset(of: stored))
        // At most the one transaction in flight when killed may be committed without having been printed.
        #expect(stored.count - acknowledged.count <= 1)
        let db = try SQLiteConnection(path: path)
        let check = try db.prepare("PRAGMA integrity_check")
        #expect(try check.step() && check.string(0) == "ok")
    }
}
