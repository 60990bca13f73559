import BridgeCore
import CSQLite
import Foundation
import Platform

/// What a salvage got back from a damaged spool file.
public struct SalvageReport: Sendable, Equatable {
    /// Scans copied into this spool, with their id, times, state and each sink's delivery state.
    public var recovered = 0
    /// Scans already here (the same id or position): left as they are.
    public var alreadyHere = 0
    /// Positions of the damaged file's sequence that could not be read (a position emptied by a purge that sits
    /// in a damaged page counts too: an upper bound of the scans lost), and rows read as values their table refuses
    /// (a NULL id: a damaged cell).
    public var unreadable = 0
    /// Positions up to the damaged file's last that gave nothing when asked for alone: purged before the damage,
    /// or lost without a trace in a damaged page (the file cannot tell which).
    public var absent = 0
    /// Recovered scans whose delivery states could not be read: pending again for every sink they were queued for
    /// (sent once more, under the same `Idempotency-Key`).
    public var statesLost = 0

    public init() {}
}

/// One column's value, as SQLite stored it (the spool's tables hold text and integers only).
enum SQLiteValue {
    case null
    case integer(Int)
    case text(String)

    init(_ s: Statement, _ column: Int32) {
        switch sqlite3_column_type(s.handle, column) {
        case SQLITE_NULL: self = .null
        case SQLITE_INTEGER: self = .integer(s.int(column))
        default: self = .text(s.string(column) ?? "")
        }
    }

    func bind(_ s: Statement, _ index: Int32) throws(SQLiteError) {
        switch self {
        case .null: try s.bind(index, nil as String?)
        case .integer(let n): try s.bind(index, n)
        case .text(let t): try s.bind(index, t)
        }
    }
}

/// Reads every scan a damaged spool file still gives (issue 43) and copies it here, by ranges of positions: a range
/// that fails is halved until the positions that fail alone are known, so one damaged page costs only the scans on
/// it. SQLite's own `.recover` cannot be used (Debian 12's shell lacks the dbpage table it needs).
extension Spool {
    /// Positions read at once.
    static let salvageRange = 500

    /// Copies every readable scan of the damaged spool file at `damaged` into this spool, keeping its position,
    /// id, times and state, and each sink's delivery state (a delivered scan is not sent again; a pending one is
    /// sent once, under the same key). The damaged file is only read.
    public func salvage(from damaged: String) throws(SpoolError) -> SalvageReport {
        do {
            return try salvage(readingFrom: damaged)
        } catch .sqlite(let error) where error.code & 0xFF == SQLITE_NOTADB {
            // The file's header is gone (its first 100 bytes): read a copy with a header rebuilt from what SQLite
            // writes there, with the WAL beside it (whose frames hold every page written since the last checkpoint).
            guard let copy = Spool.copyWithRebuiltHeader(damaged) else { throw .sqlite(error) }
            defer { Spool.removeCopy(copy) }
            return try salvage(readingFrom: copy)
        }
    }

    /// How far apart the tree's largest key and the sequence may be and still both be believed (see `salvage`):
    /// reading a million empty positions takes well under a second.
    static let salvagePlausibleGap = 1_000_000

    private func salvage(readingFrom damaged: String) throws(SpoolError) -> SalvageReport {
        let source: SQLiteConnection
        do {
            source = try SQLiteConnection(path: damaged, readOnly: true)
        } catch {
            throw .sqlite(error)
        }
        var report = SalvageReport()
        let scanColumns = try sharedColumns("scans", source)
        let queueColumns = (try? sharedColumns("sink_queue", source)) ?? []
        guard scanColumns.contains("id"), let seqIndex = scanColumns.firstIndex(of: "seq") else {
            throw .notASpool(damaged)
        }
        let select = "SELECT \(scanColumns.joined(separator: ", ")) FROM scans WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq"
        let point = "SELECT \(scanColumns.joined(separator: ", ")) FROM scans WHERE seq = ?1"
        // The last position, asked two ways: the tree's largest key and the sequence. A damaged page can make
        // either read as any number: far too large (a torn cell's key, say, 10^11: read up to it, the salvage would
        // never end) or too small (a garbled key of the rightmost leaf read as 3, which ended a salvage of 300
        // scans after 3). So the larger is read up to when the two are within `salvagePlausibleGap` (reading empty
        // positions is cheap), else the smaller. Past it, or when neither reads, ranges are read on while they give
        // scans, until 100,000 positions in a row gave none.
        let asked = [
            try? source.scalarInt("SELECT max(seq) FROM scans"),
            try? source.scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'scans'"),
        ].compactMap { $0 ?? nil }.filter { $0 > 0 }
        let last = asked.max().flatMap { high in
            asked.min().map { high - $0 <= Spool.salvagePlausibleGap ? high : $0 }
        }
        let agreed = asked.count == 2 && asked[0] == asked[1]
        var start = 1
        var emptySince = 1
        // The positions counted absent (as ranges: a purge empties long runs) and unreadable, for the walk below.
        var missing = MissingPositions()
        while last.map({ start <= $0 }) ?? false || (!agreed && start - emptySince < 100_000) {
            let end = start + Spool.salvageRange - 1
            let to = last.map { start <= $0 ? min(end, $0) : end } ?? end
            var rows: [[SQLiteValue]] = []
            var failed: [Int] = []
            Spool.readRange(
                source, range: select, point: point, start, to, columns: scanColumns.count,
                seqIndex: seqIndex, into: &rows, failed: &failed)
            // Past the last position a failed seek is no scan known to be lost.
            if last.map({ start <= $0 }) ?? true {
                report.unreadable += failed.count
                missing.unreadable.formUnion(failed)
            }
            if !rows.isEmpty { emptySince = end + 1 }
            if let last, start <= last {
                report.absent += min(end, last) - start + 1 - rows.count
                var found = Set<Int>(failed)
                for row in rows { if case .integer(let seq) = row[seqIndex] { found.insert(seq) } }
                for position in start...min(end, last) where !found.contains(position) {
                    missing.addAbsent(position)
                }
            }
            if !rows.isEmpty {
                try copy(rows, columns: scanColumns, queueColumns: queueColumns, from: source, report: &report)
            }
            start = end + 1
        }
        if report.absent + report.unreadable > 0 {
            try walkForHiddenRows(
                source, columns: scanColumns, queueColumns: queueColumns, seqIndex: seqIndex, missing: missing,
                report: &report)
        }
        return report
    }

    /// Times a walk of the table starts again past a row that failed to read.
    static let salvageWalkRestarts = 64

    /// The rows the lookups by key could not reach: a torn write can leave a leaf page's cells whole but its keys
    /// out of order (a cell garbled in the middle of the rightmost leaf, and the scans appended after it), and a
    /// lookup by key (a binary search within the leaf) then misses the later ones, saying "no such row" rather
    /// than failing. A walk of the table in its own order reads every cell; one that fails to read is stepped over
    /// (`OFFSET` counts cells without reading them). Only the positions the lookups counted absent are taken, and
    /// only rows that look whole (`looksWhole`); each one found counts so no longer, and is copied unless this spool
    /// has its id already.
    private func walkForHiddenRows(
        _ source: SQLiteConnection, columns: [String], queueColumns: [String], seqIndex: Int,
        missing: MissingPositions, report: inout SalvageReport
    ) throws(SpoolError) {
        let walk = "SELECT \(columns.joined(separator: ", ")) FROM scans NOT INDEXED LIMIT -1 OFFSET ?1"
        let idIndex = columns.firstIndex(of: "id") ?? 0
        var offset = 0
        var restarts = 0
        var batch: [[SQLiteValue]] = []
        func flush() throws(SpoolError) {
            defer { batch.removeAll() }
            // Only scans this spool has neither at that position nor under that id.
            let hidden = try withConnection { db throws(SQLiteError) -> [[SQLiteValue]] in
                let here = try db.prepare("SELECT 1 FROM scans WHERE id = ?1")
                defer { here.reset() }
                var hidden: [[SQLiteValue]] = []
                for row in batch {
                    here.reset()
                    try row[idIndex].bind(here, 1)
                    if try !here.step() { hidden.append(row) }
                }
                return hidden
            }
            report.alreadyHere += batch.count - hidden.count
            guard !hidden.isEmpty else { return }
            try copy(hidden, columns: columns, queueColumns: queueColumns, from: source, report: &report)
        }
        while restarts <= Spool.salvageWalkRestarts {
            guard let s = try? source.prepare(walk), (try? s.bind(1, offset)) != nil else {
                offset += 1
                restarts += 1
                continue
            }
            defer { s.reset() }
            var ended = false
            var failed = false
            while !ended && !failed {
                do throws(SQLiteError) {
                    while batch.count < Spool.salvageRange {
                        guard try s.step() else {
                            ended = true
                            break
                        }
                        offset += 1
                        // Only positions whose lookup said "no such row": one whose lookup failed sits in a page
                        // the damage reached, and its cells, read in order, can give bytes the damage wrote.
                        guard case .integer(let seq) = SQLiteValue(s, Int32(seqIndex)), missing.kind(seq) == false
                        else { continue }
                        let row = (0..<Int32(columns.count)).map { SQLiteValue(s, $0) }
                        guard Spool.looksWhole(row, columns: columns) else { continue }
                        report.absent -= 1
                        batch.append(row)
                    }
                } catch {
                    // This cell cannot be read: the walk starts again past it.
                    failed = true
                    offset += 1
                    restarts += 1
                }
                try flush()
            }
            if ended { break }
        }
        try flush()
    }

    /// A copy of the damaged file at `damaged` (and its WAL) beside it, `<damaged>.rebuilt-header`, whose first 100
    /// bytes are written again as SQLite writes them for a spool (sqlite.org/fileformat2.html, "The Database Header"):
    /// the page size from the WAL's header (else SQLite's default, 4096), WAL mode, UTF-8, schema format 4, the page
    /// count from the file's length, no free list (its pages are never read). Nothing else is lost with the header:
    /// the schema's tree starts at byte 100 of page 1 (kept) and names every table's root page. A WAL frame of page
    /// 1, if any, still wins when SQLite reads the copy. Nil when the copy cannot be written.
    static func copyWithRebuiltHeader(_ damaged: String) -> String? {
        let copy = damaged + ".rebuilt-header"
        let manager = FileManager.default
        removeCopy(copy)
        guard (try? manager.copyItem(atPath: damaged, toPath: copy)) != nil else { return nil }
        if manager.fileExists(atPath: damaged + "-wal") {
            try? manager.copyItem(atPath: damaged + "-wal", toPath: copy + "-wal")
        }
        var pageSize = 4096
        if let wal = FileHandle(forReadingAtPath: copy + "-wal"), let head = try? wal.read(upToCount: 12),
            head.count == 12
        {
            let size = head[8...11].reduce(0) { $0 << 8 | Int($1) }
            if size >= 512, size <= 65536, size & (size - 1) == 0 { pageSize = size }
        }
        let length = ((try? manager.attributesOfItem(atPath: copy)[.size]) as? Int) ?? 0
        var header = [UInt8](repeating: 0, count: 100)
        func put(_ value: Int, at offset: Int, bytes: Int = 4) {
            for i in 0..<bytes { header[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * (bytes - 1 - i))) }
        }
        header.replaceSubrange(0..<16, with: Array("SQLite format 3\0".utf8))
        put(pageSize == 65536 ? 1 : pageSize, at: 16, bytes: 2)
        (header[18], header[19]) = (2, 2)  // WAL
        (header[21], header[22], header[23]) = (64, 32, 32)  // payload fractions, fixed by the format
        put(1, at: 24)  // change counter, equal to the version-valid-for number below: the page count is valid
        put(max(1, length / pageSize), at: 28)
        put(1, at: 40)  // schema cookie
        put(4, at: 44)  // schema format
        put(1, at: 56)  // UTF-8
        put(1, at: 92)
        put(Int(SQLITE_VERSION_NUMBER), at: 96)
        guard let file = FileHandle(forWritingAtPath: copy) else { return nil }
        defer { try? file.close() }
        guard (try? file.write(contentsOf: header)) != nil else { return nil }
        return copy
    }

    /// Removes a copy made by `copyWithRebuiltHeader`, with the WAL and shared memory SQLite kept beside it.
    static func removeCopy(_ copy: String) {
        for suffix in ["", "-wal", "-shm"] { unlink(copy + suffix) }
    }

    /// The columns `table` has both here and in `source`, in this spool's order.
    private func sharedColumns(_ table: String, _ source: SQLiteConnection) throws(SpoolError) -> [String] {
        func columns(_ db: SQLiteConnection) throws(SQLiteError) -> [String] {
            let s = try db.prepare("PRAGMA table_info(\(table))")
            defer { s.reset() }
            var names: [String] = []
            while try s.step() { names.append(s.string(1) ?? "") }
            return names
        }
        let theirs: [String]
        do {
            theirs = try columns(source)
        } catch {
            throw .sqlite(error)
        }
        return try withConnection { db throws(SQLiteError) in try columns(db).filter(theirs.contains) }
    }

    /// Reads positions `from...to` into `rows` (in order); `failed` gets the positions that could not be read. A damaged
    /// page can make a range query fail, or end early without an error (a wrong pointer that still looks like one):
    /// each position the range did not give is asked for alone, by its key, which takes another path through the
    /// tree. A position asked for alone that gives nothing was purged, or lost without a trace.
    static func readRange(
        _ db: SQLiteConnection, range sql: String, point pointSQL: String, _ from: Int, _ to: Int, columns: Int,
        seqIndex: Int, into rows: inout [[SQLiteValue]], failed: inout [Int]
    ) {
        guard from <= to else { return }
        var found: [[SQLiteValue]] = []
        do {
            let s = try db.prepare(sql)
            defer { s.reset() }
            try s.bind(1, from)
            try s.bind(2, to)
            while try s.step() { found.append((0..<Int32(columns)).map { SQLiteValue(s, $0) }) }
        } catch {
            found.removeAll()
        }
        var seen = Set<Int>()
        for row in found { if case .integer(let seq) = row[seqIndex] { seen.insert(seq) } }
        if seen.count < to - from + 1 {
            for position in from...to where !seen.contains(position) {
                do {
                    let s = try db.prepare(pointSQL)
                    defer { s.reset() }
                    try s.bind(1, position)
                    if try s.step() { found.append((0..<Int32(columns)).map { SQLiteValue(s, $0) }) }
                } catch {
                    failed.append(position)
                }
            }
        }
        rows += found.sorted { a, b in
            if case .integer(let x) = a[seqIndex], case .integer(let y) = b[seqIndex] { return x < y }
            return false
        }
    }

    /// The rows of `sql` (one `?1`) for `seq`; nil when they could not be read.
    static func readRows(_ db: SQLiteConnection, _ sql: String, _ seq: Int, columns: Int) -> [[SQLiteValue]]? {
        do {
            let s = try db.prepare(sql)
            defer { s.reset() }
            try s.bind(1, seq)
            var rows: [[SQLiteValue]] = []
            while try s.step() { rows.append((0..<Int32(columns)).map { SQLiteValue(s, $0) }) }
            return rows
        } catch {
            return nil
        }
    }

    /// Steps `statement` (an insert or update of a salvaged row); false when the row breaks a rule of its table (a
    /// NULL id, a state no scan has: a damaged cell read as values). SQLite undoes only that statement, so the
    /// salvage goes on with the next row instead of failing whole and being tried again, in vain, at every start.
    static func stepUnlessBroken(_ statement: Statement) throws(SQLiteError) -> Bool {
        do {
            _ = try statement.step()
            return true
        } catch let error where error.code & 0xFF == SQLITE_CONSTRAINT {
            return false
        }
    }

    /// Inserts `rows` (scans) in one transaction, then gives each the delivery states it had.
    private func copy(
        _ rows: [[SQLiteValue]], columns: [String], queueColumns: [String], from source: SQLiteConnection,
        report: inout SalvageReport
    ) throws(SpoolError) {
        guard let seqIndex = columns.firstIndex(of: "seq") else { return }
        // Each scan's queue rows in the damaged file, read before the write lock is taken; nil: unreadable.
        var states: [Int: [[SQLiteValue]]?] = [:]
        let queueSelect = "SELECT \(queueColumns.joined(separator: ", ")) FROM sink_queue WHERE seq = ?1"
        for row in rows {
            guard case .integer(let seq) = row[seqIndex] else { continue }
            states[seq] =
                queueColumns.isEmpty ? nil : Spool.readRows(source, queueSelect, seq, columns: queueColumns.count)
        }
        let insert =
            "INSERT INTO scans (\(columns.joined(separator: ", "))) VALUES ("
            + columns.indices.map { "?\($0 + 1)" }.joined(separator: ", ") + ") ON CONFLICT DO NOTHING"
        let others = columns.filter { $0 != "seq" }
        let insertWithoutSeq =
            "INSERT INTO scans (\(others.joined(separator: ", "))) VALUES ("
            + others.indices.map { "?\($0 + 1)" }.joined(separator: ", ") + ")"
        let sinkIndex = queueColumns.firstIndex(of: "sink")
        let stateColumns = queueColumns.filter { $0 != "sink" && $0 != "seq" }
        let update =
            "UPDATE sink_queue SET "
            + stateColumns.enumerated().map { "\($0.element) = ?\($0.offset + 3)" }.joined(separator: ", ")
            + " WHERE sink = ?1 AND seq = ?2"
        let (recovered, lost, broken) = try withConnection { db throws(SQLiteError) -> (Int, Int, Int) in
            try db.transaction { () throws(SQLiteError) -> (Int, Int, Int) in
                let sequenceBefore = try db.scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'scans'") ?? 0
                var recovered = 0
                var lost = 0
                var broken = 0
                let scan = try db.prepare(insert)
                let idIndex = columns.firstIndex(of: "id") ?? 0
                let known = try db.prepare("SELECT 1 FROM scans WHERE id = ?1")
                for row in rows {
                    guard case .integer(let original) = row[seqIndex] else { continue }
                    var seq = original
                    scan.reset()
                    for (index, value) in row.enumerated() { try value.bind(scan, Int32(index + 1)) }
                    guard try Spool.stepUnlessBroken(scan) else {
                        broken += 1
                        continue
                    }
                    if db.changes == 0 {
                        // Its position is taken by another scan (a fresh spool that began from 1, when power was cut
                        // between moving the file aside and continuing its sequence): kept at a new position.
                        known.reset()
                        try row[idIndex].bind(known, 1)
                        guard try !known.step() else {
                            known.reset()
                            continue
                        }
                        let moved = try db.prepare(insertWithoutSeq)
                        for (index, value) in row.enumerated() where index != seqIndex {
                            try value.bind(moved, Int32(index < seqIndex ? index + 1 : index))
                        }
                        guard try Spool.stepUnlessBroken(moved) else {
                            broken += 1
                            continue
                        }
                        seq = try db.scalarInt("SELECT last_insert_rowid()") ?? seq
                    }
                    recovered += 1
                    // The trigger queued it for today's sinks as pending; the damaged file says what it was.
                    guard let queued = states[original] ?? nil, let sinkIndex else {
                        lost += 1
                        continue
                    }
                    var statesBroken = false
                    let sinks = queued.compactMap { row -> String? in
                        if case .text(let name) = row[sinkIndex] { return name }
                        return nil
                    }
                    let drop = try db.prepare("DELETE FROM sink_queue WHERE seq = ?1 AND sink = ?2")
                    let here = try db.prepare("SELECT sink FROM sink_queue WHERE seq = ?1")
                    try here.bind(1, seq)
                    var present: [String] = []
                    while try here.step() { present.append(here.string(0) ?? "") }
                    for name in present where !sinks.contains(name) {
                        drop.reset()
                        try drop.bind(1, seq)
                        try drop.bind(2, name)
                        try drop.step()
                    }
                    let add = try db.prepare(
                        "INSERT INTO sink_queue (sink, seq, state) VALUES (?1, ?2, 'pending') ON CONFLICT DO NOTHING")
                    let set = try db.prepare(update)
                    for queueRow in queued {
                        guard case .text(let name) = queueRow[sinkIndex] else { continue }
                        add.reset()
                        try add.bind(1, name)
                        try add.bind(2, seq)
                        try add.step()
                        set.reset()
                        try set.bind(1, name)
                        try set.bind(2, seq)
                        var index: Int32 = 3
                        for (column, value) in zip(queueColumns, queueRow) where column != "sink" && column != "seq" {
                            try value.bind(set, index)
                            index += 1
                        }
                        // A state the table does not allow was read from a damaged page: pending again.
                        if try !Spool.stepUnlessBroken(set) { statesBroken = true }
                    }
                    if statesBroken { lost += 1 }
                }
                // The scans alive are the sequence plus `scan_counts` (Schema 4), and a scan inserted at a position
                // of its own moves the sequence only past the highest: the pending row makes up the difference.
                let sequenceAfter = try db.scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'scans'") ?? 0
                let missing = recovered - (sequenceAfter - sequenceBefore)
                if missing != 0 {
                    try db.execute("UPDATE scan_counts SET n = n + \(missing) WHERE state = 'pending'")
                }
                return (recovered, lost, broken)
            }
        }
        report.recovered += recovered
        report.alreadyHere += rows.count - recovered - broken
        report.unreadable += broken
        report.statesLost += lost
    }
}

extension Spool {
    /// Whether a row the walk read is a scan as the spool wrote it, by what a scan says twice: its id is a UUID in
    /// canonical form, and its `input` is a JSON object whose `scanMetadata.timestamp` is its `created_at` (and
    /// whose `identifier` is its `identifier`). Random bytes over a cell break one of these wherever they fall: the
    /// record's header and first columns (the id), or `raw` and the `input` after it. A scan without `input` (a
    /// read no identifier was found in) has nothing to check it by and is not taken.
    static func looksWhole(_ row: [SQLiteValue], columns: [String]) -> Bool {
        func text(_ name: String) -> String? {
            guard let index = columns.firstIndex(of: name), case .text(let value) = row[index] else { return nil }
            return value
        }
        guard let id = text("id"), UUID(uuidString: id)?.uuidString.lowercased() == id.lowercased(), id.count == 36,
            let createdAt = text("created_at"), let input = text("input"),
            let json = try? JSONParser.parse(input), case .object = json,
            json["scanMetadata"]?["timestamp"] == .string(createdAt)
        else { return false }
        if let identifier = text("identifier"), json["identifier"] != .string(identifier) { return false }
        return true
    }
}

/// The positions a salvage's lookups by key did not give: those that failed (unreadable) and those that gave
/// nothing (absent), the latter as ranges, since a purge empties long runs of positions.
struct MissingPositions {
    var unreadable = Set<Int>()
    /// Ascending, disjoint.
    private var absent: [ClosedRange<Int>] = []

    /// Positions come in ascending order.
    mutating func addAbsent(_ position: Int) {
        if let tail = absent.last, tail.upperBound + 1 == position {
            absent[absent.count - 1] = tail.lowerBound...position
        } else {
            absent.append(position...position)
        }
    }

    /// true: unreadable; false: absent; nil: the lookups gave it.
    func kind(_ position: Int) -> Bool? {
        if unreadable.contains(position) { return true }
        var low = 0
        var high = absent.count
        while low < high {
            let middle = (low + high) / 2
            if absent[middle].upperBound < position { low = middle + 1 } else { high = middle }
        }
        return low < absent.count && absent[low].contains(position) ? false : nil
    }
}
