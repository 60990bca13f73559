import BridgeCore
import BridgeTestSupport
import CSQLite
import Foundation
import Platform
import Testing

@testable import Spool

/// A damaged spool file (issue 43), on real SQLite files damaged as a worn card leaves them: random bytes over the
/// cells of every third page past the schema's, after a checkpoint put every page in the main file. Found by the
/// statement that meets it, moved aside, replaced by a fresh file that takes the read, and salvaged with every
/// scan's record and delivery state exactly as they were.
@Suite(.serialized)
struct SpoolDamageTests {
    let builder = ScanBuilder(parser: PlingsURLParser())

    /// Scan `n`: a Plings URL, or (every seventh) an unrecognized read.
    func scan(_ n: Int) -> NewScan {
        let raw = n % 7 == 0 ? "not a url \(n)" : "https://s.plings.io/?t=q&i=Dmg\(n)x&p=4.2.\(n)"
        return builder.build(
            Read(
                sourceKind: .manual, device: "t", raw: raw, time: Date(timeIntervalSince1970: 1_781_424_000 + Double(n))
            ),
            fix: nil)
    }

    /// A spool of 300 scans, queued for `mqtt` too with every even one delivered there, checkpointed and closed.
    /// Returns the records and the scans still pending for `mqtt`.
    func filledSpool(_ path: String) throws -> (records: [ScanRecord], mqttPending: Set<String>) {
        let spool = try Spool(path: path, synchronous: .off)
        try spool.registerSink("mqtt")
        for n in 1...300 { try spool.insert([scan(n)]) }
        let queued = try spool.list(state: .pending, sink: "mqtt")
        for (index, record) in queued.enumerated() where index % 2 == 1 {
            try spool.ledger("mqtt").recordOutcome(id: record.id, outcome: .delivered(response: ""), now: Date())
        }
        let records = try spool.list()
        let pending = Set(try spool.list(state: .pending, sink: "mqtt").map(\.id))
        try spool.withTestConnection { db throws(SQLiteError) in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        return (records, pending)
    }

    /// Random bytes (a fixed seed) over 3,000 bytes of every third page from page `from` on.
    func damage(_ path: String, from: Int = 20) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        var generator = SeededRandom(seed: 43)
        for page in stride(from: from, to: Int(size) / 4096, by: 3) {
            try handle.seek(toOffset: UInt64(page * 4096 + 200))
            handle.write(Data(generator.bytes(3000)))
        }
    }

    func digest(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    @Test func aCommitThatMeetsDamageGoesToAFreshSpoolAndTheReadableScansAreSalvaged() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let (originals, mqttPending) = try filledSpool(path)
        try damage(path)
        let spool = try Spool(path: path)
        let told = Mutex<[SpoolDamage]>([])
        spool.onDamage { damage in told.withLock { $0.append(damage) } }
        // The spool's counts (a handful of rows on pages the damage spared) still read; the scans do not.
        #expect(throws: SpoolError.self) { try spool.list() }
        let found = try #require(told.withLock { $0 }.first)
        #expect(found.movedTo.hasPrefix(path + ".damaged-") && FileManager.default.fileExists(atPath: found.movedTo))
        #expect(found.error.contains("malformed"), "\(found.error)")
        // The next read goes to the fresh file at the same path.
        let after = scan(1000)
        try spool.insert([after])
        #expect(try spool.record(id: after.id)?.raw == after.read.raw)
        let damagedBytes = try digest(found.movedTo)

        let report = try spool.salvage(from: found.movedTo)
        // Every position up to the sequence (300) is accounted for, and so is a row whose damaged key reads past it
        // (salvaged at that key: docs/reliability.md, "Known limits"), which depends on where the damage fell.
        var pastSequence = 0
        try spool.withTestConnection { db throws(SQLiteError) in
            pastSequence = try db.scalarInt("SELECT count(*) FROM scans WHERE seq > 300 AND seq < \(1 << 32)") ?? 0
        }
        #expect(report.recovered + report.absent + report.unreadable == 300 + pastSequence, "\(report)")
        #expect(report.recovered >= 150, "a third of the pages is damaged: \(report)")
        let byID = Dictionary(uniqueKeysWithValues: originals.map { ($0.id, $0) })
        let salvaged = try spool.list().filter { $0.id != after.id }
        #expect(salvaged.count == report.recovered)
        for record in salvaged {
            let original = try #require(byID[record.id])
            #expect(record.raw == original.raw && record.state == original.state)
            #expect(record.createdAt == original.createdAt && record.inputJSON == original.inputJSON)
        }
        // Delivered to the broker stays delivered, unless its delivery state was unreadable (then sent again).
        let nowPending = Set(try spool.list(state: .pending, sink: "mqtt").map(\.id))
        let resent = nowPending.subtracting(mqttPending).subtracting([after.id])
        #expect(resent.count <= report.statesLost, "\(resent.count) delivered scans pending again: \(report)")
        // Capture order: every salvaged scan keeps its position, before the read that found the damage.
        #expect(try spool.list().last?.id == after.id)
        let counts = try spool.stats().counts.values.reduce(0, +)
        #expect(counts == report.recovered + 1)
        // The damaged file is only read; a second salvage copies nothing twice.
        #expect(try digest(found.movedTo) == damagedBytes)
        let again = try spool.salvage(from: found.movedTo)
        #expect(again.recovered == 0 && again.alreadyHere == report.recovered)
    }

    /// A torn write into the rightmost leaf of `scans` (issue 43's torn-wal case, as found there: a cell's key
    /// garbled to a number past the sequence, the cells after it whole): lookups by key stop at the garbled key
    /// and say "no such row" for every scan after it, so only a walk of the leaf in its own order reaches them.
    /// The leaf is edited as SQLite's file format lays it out (sqlite.org/fileformat2.html, "B-tree Pages": the
    /// 8-byte header of a leaf table page, type 13, its cell pointer array, each cell's payload size and rowid as
    /// varints).
    @Test func scansAfterAGarbledKeyInALeafAreSalvagedByWalkingIt() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let spool = try Spool(path: path, synchronous: .off)
        for n in [1, 2, 3, 4, 5, 6, 8, 9] { try spool.insert([scan(n)]) }
        let originals = try spool.list()
        var root = 0
        var pageSize = 0
        try spool.withTestConnection { db throws(SQLiteError) in
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            root = try db.scalarInt("SELECT rootpage FROM sqlite_master WHERE name = 'scans'") ?? 0
            pageSize = try db.scalarInt("PRAGMA page_size") ?? 0
        }
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let page = (root - 1) * pageSize
        try #require(root > 1 && file[page] == 13, "the 8 scans fit in one leaf page, the table's root")
        let cells = Int(file[page + 3]) << 8 | Int(file[page + 4])
        try #require(cells == 8)
        // The fourth cell (seq 4): past its payload-size varint, its one-byte rowid becomes 127.
        let cell = page + (Int(file[page + 8 + 6]) << 8 | Int(file[page + 8 + 7]))
        var rowid = cell
        while file[rowid] & 0x80 != 0 { rowid += 1 }
        rowid += 1
        try #require(file[rowid] == 4)
        file[rowid] = 127
        try file.write(to: URL(fileURLWithPath: path))

        let fresh = try Spool(path: dir.file("fresh.sqlite"))
        let report = try fresh.salvage(from: path)
        // By key only seqs 1-3 read (the range stops at 127, past the last position, 8; each of 4-8 alone is "no
        // such row"); walking the leaf gives 5-8 back. Seq 4's cell now says 127, past the sequence: not taken.
        #expect(report.recovered == 7 && report.absent == 1 && report.unreadable == 0, "\(report)")
        let salvaged = try fresh.list()
        let kept = originals.enumerated().filter { $0.offset != 3 }.map(\.element)
        #expect(salvaged.map(\.id) == kept.map(\.id))
        for (record, original) in zip(salvaged, kept) {
            #expect(record.raw == original.raw)
            #expect(record.inputJSON == original.inputJSON)
        }
        var positions: [Int] = []
        try fresh.withTestConnection { db throws(SQLiteError) in
            let s = try db.prepare("SELECT seq FROM scans ORDER BY seq")
            defer { s.reset() }
            while try s.step() { positions.append(s.int(0)) }
        }
        #expect(positions == [1, 2, 3, 5, 6, 7, 8], "each at its own position")
    }

    /// Power cut between moving the file aside and continuing its sequence: the fresh spool began from 1, so its
    /// scans hold positions the damaged file's scans had. Both are kept; the salvaged ones at new positions.
    @Test func aFreshSpoolThatBeganFromOneKeepsItsScansAndTheSalvagedOnes() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let damaged = dir.file("s.sqlite.damaged-20261204T000000Z")
        let (originals, _) = try filledSpool(path)
        try damage(path)
        #expect(rename(path, damaged) == 0)
        for suffix in ["-wal", "-shm"] { _ = rename(path + suffix, damaged + suffix) }
        let spool = try Spool(path: path)
        let fresh = (1...5).map { scan(5000 + $0) }
        try spool.insert(fresh)
        let report = try spool.salvage(from: damaged)
        #expect(report.recovered >= 150 && report.alreadyHere == 0, "\(report)")
        let ids = Set(try spool.list().map(\.id))
        #expect(ids.isSuperset(of: fresh.map(\.id)))
        #expect(ids.count == report.recovered + fresh.count)
        #expect(ids.subtracting(fresh.map(\.id)).isSubset(of: originals.map(\.id)))
        #expect(try spool.stats().counts.values.reduce(0, +) == ids.count)
    }

    /// Two spools on one path (as two processes): the one that finds the damage moves the file aside; the other's
    /// next write goes to the fresh file, never into the damaged one.
    @Test func anotherOpenerFollowsToTheFreshFile() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        _ = try filledSpool(path)
        try damage(path)
        let first = try Spool(path: path)
        let second = try Spool(path: path)
        let told = Mutex<[SpoolDamage]>([])
        first.onDamage { damage in told.withLock { $0.append(damage) } }
        #expect(throws: SpoolError.self) { try first.list() }
        let moved = try #require(told.withLock { $0 }.first?.movedTo)
        let before = try digest(moved)
        let read = scan(2000)
        try second.insert([read])
        #expect(try first.record(id: read.id) != nil)
        #expect(try digest(moved) == before)
    }

    /// A file whose header is gone (not a database any more) is moved aside at open, and the first handler hears it;
    /// its salvage rebuilds the header's 100 bytes as the file format defines them and gets every scan back.
    @Test func aFileWhoseHeaderIsGoneIsMovedAsideAtOpenAndSalvagedWhole() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let (originals, _) = try filledSpool(path)
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        var generator = SeededRandom(seed: 7)
        handle.write(Data(generator.bytes(100)))
        try handle.close()
        let spool = try Spool(path: path)
        let told = Mutex<[SpoolDamage]>([])
        spool.onDamage { damage in told.withLock { $0.append(damage) } }
        #expect(told.withLock { $0 }.count == 1)
        let read = scan(3000)
        try spool.insert([read])
        #expect(try spool.list().map(\.id) == [read.id])
        let moved = try #require(told.withLock { $0 }.first?.movedTo)
        let damagedBytes = try digest(moved)
        let report = try spool.salvage(from: moved)
        #expect(report.recovered == 300 && report.unreadable == 0, "\(report)")
        #expect(Set(try spool.list().map(\.id)) == Set(originals.map(\.id) + [read.id]))
        // The copy with the rebuilt header is gone; the damaged file is left as it was.
        #expect(!FileManager.default.fileExists(atPath: moved + ".rebuilt-header"))
        #expect(try digest(moved) == damagedBytes)
    }

    /// Two files moved aside within one second (a fresh spool found damaged at once) get two names: the second
    /// never replaces the first, whose scans are still to be salvaged.
    @Test func twoMovesInOneSecondKeepBothFiles() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let at = Date(timeIntervalSince1970: 1_796_000_000)
        try Data("first".utf8).write(to: URL(fileURLWithPath: path))
        try Data("first wal".utf8).write(to: URL(fileURLWithPath: path + "-wal"))
        let first = try #require(Spool.moveAside(path, at: at))
        try Data("second".utf8).write(to: URL(fileURLWithPath: path))
        let second = try #require(Spool.moveAside(path, at: at))
        #expect(first != second)
        #expect(try String(contentsOfFile: first, encoding: .utf8) == "first")
        #expect(try String(contentsOfFile: first + "-wal", encoding: .utf8) == "first wal")
        #expect(try String(contentsOfFile: second, encoding: .utf8) == "second")
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A statement of the other connection that failed on the damaged file while it was being moved reports its
    /// failure after the move: the fresh file at the path is not moved aside for it (seen in scripts/spool-damage:
    /// the fresh file was moved under the same name as the damaged one, which was gone before its salvage).
    @Test func aFailureOnTheFileAlreadyMovedDoesNotMoveTheFreshOne() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        _ = try filledSpool(path)
        try damage(path)
        let spool = try Spool(path: path)
        let damagedFile = try #require(FileIdentity(path: path))
        let told = Mutex<[SpoolDamage]>([])
        spool.onDamage { damage in told.withLock { $0.append(damage) } }
        #expect(throws: SpoolError.self) { try spool.list() }
        #expect(told.withLock { $0 }.count == 1)
        let read = scan(4000)
        try spool.insert([read])
        // The late report of the other connection, about the file it ran on.
        spool.noteFailure(
            SQLiteError(code: SQLITE_CORRUPT, message: "database disk image is malformed", context: "step"),
            on: damagedFile)
        #expect(told.withLock { $0 }.count == 1)
        #expect(try spool.record(id: read.id) != nil)
    }

    /// The quick check finds damage no statement met yet; a sound file passes.
    @Test func theQuickCheckFindsDamageNoStatementMet() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        _ = try filledSpool(path)
        #expect(Spool.integrityProblem(path: path) == nil)
        try damage(path)
        let problem = try #require(Spool.integrityProblem(path: path))
        #expect(!problem.contains("\n") && !problem.contains("***"), "one plain line: \(problem)")
        let spool = try Spool(path: path)
        #expect(try spool.check() != nil)
        #expect(Spool.integrityProblem(path: path) == nil)
    }

    /// A check the service's stop ended (`SpoolWorkStop`) gives no verdict: a damaged file stays where it is, and
    /// the next check, not stopped, still finds the damage (sqlite.org/c3ref/interrupt.html: an interrupted
    /// statement ends with SQLITE_INTERRUPT).
    @Test func aStoppedCheckGivesNoVerdictAndMovesNothing() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        _ = try filledSpool(path)
        try damage(path)
        let spool = try Spool(path: path)
        let stop = SpoolWorkStop()
        stop.stop()
        func movedAside() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("s.sqlite.damaged-") }
        }
        #expect(try spool.check(stop: stop) == nil)
        #expect(try movedAside().isEmpty)
        #expect(try spool.check() != nil)
        #expect(try movedAside().contains { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") })
    }

    /// The last cell of the rightmost leaf page of `scans` in the file at `path`: (its offset in the file, its
    /// key's bytes). A table leaf page (type 13) gives its cell count in bytes 3-4 and its cell pointers from byte 8;
    /// a cell is the payload's length, then the key, each a varint (sqlite.org/fileformat2.html, "B-tree Pages").
    func lastCellKey(_ path: String) throws -> (offset: Int, bytes: [UInt8]) {
        let db = try SQLiteConnection(path: path, readOnly: true)
        let page = try #require(
            try db.scalarInt(
                "SELECT pageno FROM dbstat WHERE name = 'scans' AND pagetype = 'leaf' ORDER BY path DESC LIMIT 1"))
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let base = (page - 1) * 4096
        #expect(bytes[base] == 13)
        let cells = Int(bytes[base + 3]) << 8 | Int(bytes[base + 4])
        let pointer = base + 8 + 2 * (cells - 1)
        var at = base + (Int(bytes[pointer]) << 8 | Int(bytes[pointer + 1]))
        while bytes[at] & 0x80 != 0 { at += 1 }
        at += 1
        var key = [bytes[at]]
        while bytes[at + key.count - 1] & 0x80 != 0 { key.append(bytes[at + key.count]) }
        return (at, key)
    }

    /// Moves the file at `path` aside as the spool does and salvages it into a fresh spool beside it, on a thread of
    /// its own as the service does: a salvage that does not end within a minute fails the test instead of holding
    /// the suite.
    func salvageIntoFresh(_ path: String, in dir: TemporaryDirectory) throws -> (Spool, SalvageReport)? {
        let damaged = path + ".damaged-20261205T000000Z"
        #expect(rename(path, damaged) == 0)
        let spool = try Spool(path: dir.file("fresh.sqlite"))
        let outcome = Mutex<Result<SalvageReport, SpoolError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let result = Result { () throws(SpoolError) in try spool.salvage(from: damaged) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + 60) == .success else {
            Issue.record("the salvage did not end within 60 s")
            return nil
        }
        return (spool, try #require(outcome.withLock { $0 }).get())
    }

    /// A torn sector over a cell of `scans`, as a torn WAL frame copied into the file by the service's own
    /// checkpoint leaves it (seen in scripts/spool-damage's torn-wal case): the key's last byte gains its
    /// continuation bit, so the key takes the record's first byte and the record reads shifted, as values the
    /// table refuses (a NULL id). Such a row is counted unreadable and the salvage goes on: before, the whole salvage
    /// failed on it, at every start, and no scan of the damaged file came back.
    @Test func aCellReadAsValuesTheTableRefusesIsUnreadableAndTheRestAreSalvaged() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let (originals, _) = try filledSpool(path)
        let key = try lastCellKey(path)
        #expect(key.bytes == [0x82, 0x2C], "scan 300's key as a varint")
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: UInt64(key.offset + key.bytes.count - 1))
        handle.write(Data([key.bytes[key.bytes.count - 1] | 0x80]))
        try handle.close()
        guard let (spool, report) = try salvageIntoFresh(path, in: dir) else { return }
        #expect(report.recovered == 299 && report.unreadable >= 1, "\(report)")
        let byID = Dictionary(uniqueKeysWithValues: originals.map { ($0.id, $0) })
        let salvaged = try spool.list()
        #expect(Set(salvaged.map(\.id)) == Set(originals.dropLast().map(\.id)))
        for record in salvaged { #expect(record.raw == byID[record.id]?.raw) }
        #expect(try spool.stats().counts.values.reduce(0, +) == 299)
    }

    /// A key read as a large number (a damaged page's bytes) is not read up to: 10^11 positions would take the
    /// salvage days. The sequence says where the scans end; past it the salvage stops after 100,000 empty positions.
    @Test func aKeyReadAsAHugeNumberDoesNotHoldTheSalvage() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let (originals, _) = try filledSpool(path)
        do {
            let db = try SQLiteConnection(path: path)
            try db.execute("UPDATE scans SET seq = 100000000000 WHERE seq = 300")
            try db.execute("UPDATE sqlite_sequence SET seq = 300 WHERE name = 'scans'")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            #expect(try db.scalarInt("SELECT max(seq) FROM scans") == 100_000_000_000)
        }
        guard let (spool, report) = try salvageIntoFresh(path, in: dir) else { return }
        #expect(report.recovered == 299 && report.absent == 1, "\(report)")
        #expect(Set(try spool.list().map(\.id)) == Set(originals.dropLast().map(\.id)))
    }
}
