import Bridge
import BridgeCore
import CSQLite
import Foundation
import Logging
import Spool
import Platform
import ReadPipeline

/// Durable spool commits per second against raw SQLite doing the same inserts with the same pragmas.
enum SpoolBenchmark {
    static func run(arguments: [String]) {
        var count = 5000
        var directory = NSTemporaryDirectory()
        var i = 0
        while i < arguments.count {
            if arguments[i] == "--count", i + 1 < arguments.count, let n = Int(arguments[i + 1]) { count = n }
            if arguments[i] == "--dir", i + 1 < arguments.count { directory = arguments[i + 1] }
            i += arguments[i] == "--no-scale" ? 1 : 2
        }
        let scans = makeScans(count)

        // Interleave the two measurements so disk cache and CPU frequency treat them alike, and take turns at going
        // first (raw, ours; ours, raw; ...): on a disk the second run of a pair is measurably slower (about 3 %,
        // docs/benchmarks.md, "The spool's commit rate, traced"), which a fixed order would charge to one side.
        var raw: [Double] = []
        var ours: [Double] = []
        for round in 0..<4 {
            let rawRun = { raw.append(rawInserts(scans, path: "\(directory)/bench-raw-\(round).sqlite")) }
            let ourRun = { ours.append(spoolInserts(scans, path: "\(directory)/bench-spool-\(round).sqlite")) }
            if round % 2 == 0 {
                rawRun()
                ourRun()
            } else {
                ourRun()
                rawRun()
            }
        }
        let burst = 1000
        let rawBurst = rawInserts(Array(scans.prefix(burst)), path: "\(directory)/bench-raw-burst.sqlite")
        let (pipelineBurst, fsyncs) = pipelineBurstRate(
            Array(scans.prefix(burst)), path: "\(directory)/bench-burst.sqlite")
        let single = pipelineSingleRate(Array(scans.prefix(1000)), path: "\(directory)/bench-single.sqlite")

        BenchTable.print([
            BenchRow(
                metric: "spool commits/s, one read per transaction (median of 4, each first in turn, \(count) reads)",
                ours: median(ours), baseline: median(raw), unit: "/s", goal: ">= 0.9 x raw SQLite"),
            BenchRow(
                metric: "pipeline accept, one read at a time (submit -> durable ack)",
                ours: single, baseline: median(raw), unit: "/s", goal: "info"),
            BenchRow(
                metric: "burst of \(burst) reads through the pipeline (group commit, \(fsyncs) transactions)",
                ours: pipelineBurst, baseline: rawBurst, unit: "/s", goal: "> raw single-row inserts"),
        ])
        if !arguments.contains("--no-scale") { SpoolScaleBenchmark.run(arguments: ["--dir", directory]) }
    }

    /// The middle value; of an even count, the mean of the middle two.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    static func makeScans(_ count: Int) -> [NewScan] {
        let builder = ScanBuilder(parser: PlingsURLParser())
        let fix = LocationFix(latitude: 59.3293, longitude: 18.0686, accuracy: 8)
        return (0..<count).map { n in
            let read = Read(
                sourceKind: SourceKind("hid"), device: "bench",
                raw: "https://s.plings.io/?t=q&i=\(benchIdentifier("Bench", n % 50))&p=4.2.3.3.6",
                time: Date())
            return builder.build(read, fix: fix)
        }
    }

    static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// The baseline: the same table, the same pragmas, one prepared INSERT per transaction, straight C calls.
    static func rawInserts(_ scans: [NewScan], path: String) -> Double {
        remove(path)
        defer { remove(path) }
        guard let raw = RawSQLite(path: path) else { return 0 }
        let start = MonotonicClock.now()
        for scan in scans { raw.insert(scan) }
        return Double(scans.count) / (MonotonicClock.now() - start)
    }

    /// Median milliseconds of one raw durable commit made after `pause` seconds without I/O, on a table
    /// already past its first WAL checkpoints: the state a gate reader's commit meets after each tap. (On
    /// the VM this was measured on, an fsync after a pause costs several times one right after another.)
    static func rawCommitAfterPause(path: String, samples: Int, pause: Double) -> Double {
        remove(path)
        defer { remove(path) }
        guard let raw = RawSQLite(path: path) else { return .nan }
        let scans = makeScans(1500 + samples)
        for scan in scans.prefix(1500) { raw.insert(scan) }
        var times: [Double] = []
        for scan in scans.suffix(samples) {
            Thread.sleep(forTimeInterval: pause)
            let start = MonotonicClock.now()
            raw.insert(scan)
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    static func spoolInserts(_ scans: [NewScan], path: String) -> Double {
        remove(path)
        defer { remove(path) }
        guard let spool = try? Spool(path: path) else { return 0 }
        let start = MonotonicClock.now()
        for scan in scans { try? spool.insert([scan]) }
        return Double(scans.count) / (MonotonicClock.now() - start)
    }

    /// Reads submitted one after another, each waited for: the latency-bound case (a gate reader).
    static func pipelineSingleRate(_ scans: [NewScan], path: String) -> Double {
        remove(path)
        defer { remove(path) }
        guard let spool = try? Spool(path: path) else { return 0 }
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: NoFixProvider(),
            debounce: [:], logger: Logger(minimum: .error))
        pipeline.start()
        let done = DispatchSemaphore(value: 0)
        let start = MonotonicClock.now()
        for scan in scans {
            pipeline.submit(scan.read) { _ in done.signal() }
            done.wait()
        }
        let rate = Double(scans.count) / (MonotonicClock.now() - start)
        pipeline.stop()
        return rate
    }

    /// A burst submitted at once (a packing bench): group commit, acknowledged only after each transaction.
    static func pipelineBurstRate(_ scans: [NewScan], path: String) -> (Double, Int) {
        remove(path)
        defer { remove(path) }
        guard let spool = try? Spool(path: path) else { return (0, 0) }
        let batches = Counter()
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: NoFixProvider(),
            debounce: [:], logger: Logger(minimum: .error), onCommitted: { _ in batches.add() })
        pipeline.start()
        let group = DispatchGroup()
        let start = MonotonicClock.now()
        for scan in scans {
            group.enter()
            pipeline.submit(scan.read) { _ in group.leave() }
        }
        group.wait()
        let rate = Double(scans.count) / (MonotonicClock.now() - start)
        pipeline.stop()
        return (rate, batches.value)
    }
}

/// The spool's table with straight SQLite C calls and nothing else: the baseline of the spool benchmarks.
final class RawSQLite {
    private let db: OpaquePointer
    private let statement: OpaquePointer
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init?(path: String) {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { return nil }
        sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000", nil, nil, nil)
        sqlite3_exec(
            db,
            """
            CREATE TABLE scans (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL,
            state TEXT NOT NULL, source_kind TEXT NOT NULL, device TEXT NOT NULL, uid TEXT, raw TEXT NOT NULL, input TEXT,
            attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, next_attempt_at TEXT, delivered_at TEXT, response TEXT,
            identifier TEXT, last_attempt_at TEXT);
            CREATE INDEX scans_state_seq ON scans (state, seq);
            CREATE INDEX scans_pending_identifier ON scans (identifier, seq) WHERE state = 'pending';
            """, nil, nil, nil)
        var statement: OpaquePointer?
        sqlite3_prepare_v2(
            db,
            "INSERT INTO scans (id, created_at, state, source_kind, device, uid, raw, input, identifier, attempts, last_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10)",
            -1, &statement, nil)
        guard let statement else {
            sqlite3_close(db)
            return nil
        }
        self.db = db
        self.statement = statement
    }

    deinit {
        sqlite3_finalize(statement)
        sqlite3_close(db)
    }

    /// One scan in its own durable transaction.
    func insert(_ scan: NewScan) {
        sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
        sqlite3_reset(statement)
        sqlite3_bind_text(statement, 1, scan.id, -1, transient)
        sqlite3_bind_text(statement, 2, Timestamp.format(scan.read.time), -1, transient)
        sqlite3_bind_text(statement, 3, scan.state.rawValue, -1, transient)
        sqlite3_bind_text(statement, 4, scan.read.sourceKind.rawValue, -1, transient)
        sqlite3_bind_text(statement, 5, scan.read.device, -1, transient)
        sqlite3_bind_null(statement, 6)
        sqlite3_bind_text(statement, 7, scan.read.raw, -1, transient)
        sqlite3_bind_text(statement, 8, scan.inputJSON, -1, transient)
        sqlite3_bind_text(statement, 9, scan.identifier, -1, transient)
        sqlite3_bind_null(statement, 10)
        sqlite3_step(statement)
        sqlite3_exec(db, "COMMIT", nil, nil, nil)
    }
}

/// A count shared by the benchmark's completion handlers.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// A child process for the spool tests: commits `--count` scans one transaction at a time and prints each
/// id on stdout only after its commit returned, so a test that kills it knows exactly what was acknowledged.
enum SpoolWriter {
    static func run(arguments: [String]) {
        var path = ""
        var count = 1000
        var tag = "w"
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--spool": path = arguments[i + 1]
            case "--count": count = Int(arguments[i + 1]) ?? count
            case "--tag": tag = arguments[i + 1]
            default: break
            }
            i += 2
        }
        let spool: Spool
        do {
            spool = try Spool(path: path)
        } catch {
            FileHandle.standardError.write(Data("writer: \(error)\n".utf8))
            exit(1)
        }
        let builder = ScanBuilder(parser: PlingsURLParser())
        for n in 0..<count {
            let read = Read(
                sourceKind: .manual, device: tag,
                raw: "https://s.plings.io/?t=q&i=\(benchIdentifier("W" + tag, n % 7))&p=1.\(n)",
                time: Date())
            let scan = builder.build(read, fix: nil)
            do {
                try spool.insert([scan])
            } catch {
                FileHandle.standardError.write(Data("writer: \(error)\n".utf8))
                exit(1)
            }
            // One write(2) per id, unbuffered: what the test reads is exactly what was acknowledged.
            FileHandle.standardOutput.write(Data((scan.id + "\n").utf8))
        }
    }
}
