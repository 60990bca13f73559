import BridgeCore
import CSQLite
import Foundation
import Platform
import Spool

/// What "one delivery model" (issue 23, item 2: the API's delivery state moved into `sink_queue` like MQTT's)
/// would cost, measured on the spool's own schema rather than argued: the durable commit of a scan on today's
/// spool and on two with the API as a queue sink (`Shape`), each against raw SQLite, and the migration that would
/// move a year of the API's state into the queue.
///
/// Only the state moves here: the API's attempts, backoff, kept response and batches would still need columns of
/// their own beside the queue's state.
enum DeliveryModelBenchmark {
    static func run(arguments: [String]) {
        var count = 1_000_000
        var commits = 1000
        var directory = NSTemporaryDirectory()
        var i = 0
        while i + 1 < arguments.count {
            if arguments[i] == "--count", let n = Int(arguments[i + 1]) { count = n }
            if arguments[i] == "--commits", let n = Int(arguments[i + 1]) { commits = n }
            if arguments[i] == "--dir" { directory = arguments[i + 1] }
            i += 2
        }
        var rows = commitRows(directory: directory, commits: commits)
        rows += migrationRows(directory: directory, count: count)
        BenchTable.print(rows)
    }

    /// The queue as item 2 needs it, after the API is registered in `sinks`: a column for the identifier...
    static let queueIdentifierColumn = "ALTER TABLE sink_queue ADD COLUMN identifier TEXT;"

    /// ...then the API state's indexes moved from `scans` to the queue (per-identifier order while pending), and
    /// the trigger filling the new column. The migration copies the rows between the two steps.
    static let queueIndexesAndTrigger = """
        DROP INDEX scans_state_seq;
        DROP INDEX scans_pending_identifier;
        CREATE INDEX sink_queue_pending_identifier ON sink_queue (sink, identifier, seq) WHERE state = 'pending';
        DROP TRIGGER scans_enqueue_for_sinks;
        CREATE TRIGGER scans_enqueue_for_sinks AFTER INSERT ON scans BEGIN
            INSERT INTO sink_queue (sink, seq, state, identifier)
                SELECT name, NEW.seq, 'pending', NEW.identifier FROM sinks WHERE enabled = 1;
        END;
        """

    /// The spool's shapes the commit is measured on: today's, and two with the API as a queue sink.
    enum Shape: CaseIterable {
        /// Today's schema: the API's state in `scans` (indexed by state and by pending identifier).
        case today
        /// The API registered in `sinks`: the trigger adds its queue row, `scans` keeps its indexes.
        case queueRowAdded
        /// As item 2 would have it: the API's queue row carries the identifier, indexed for per-identifier
        /// order while pending, and `scans` loses the two indexes that served the API's state.
        case queueShaped

        var name: String {
            switch self {
            case .today: return "today's spool"
            case .queueRowAdded: return "the API's queue row added"
            case .queueShaped: return "the API in sink_queue, scans' state indexes moved there"
            }
        }

        var sql: String? {
            switch self {
            case .today: return nil
            case .queueRowAdded: return "INSERT INTO sinks (name) VALUES ('api');"
            case .queueShaped:
                return "INSERT INTO sinks (name) VALUES ('api');" + DeliveryModelBenchmark.queueIdentifierColumn
                    + DeliveryModelBenchmark.queueIndexesAndTrigger
            }
        }
    }

    /// `Spool.insert`, one scan per transaction, on each shape and with raw SQLite calls (the spool benchmark's
    /// baseline), interleaved five times so disk and CPU treat all alike.
    static func commitRows(directory: String, commits: Int) -> [BenchRow] {
        var spools: [(Shape, Spool)] = []
        let paths = Shape.allCases.indices.map { "\(directory)/bench-model-\($0).sqlite" }
        defer { for path in paths { SpoolBenchmark.remove(path) } }
        for (shape, path) in zip(Shape.allCases, paths) {
            SpoolBenchmark.remove(path)
            guard let spool = try? Spool(path: path), shape.sql.map({ execute(path, $0) }) ?? true else {
                print("delivery model: cannot create \(shape.name)")
                return []
            }
            spools.append((shape, spool))
        }
        var raw: [Double] = []
        var rates = [[Double]](repeating: [], count: spools.count)
        for round in 0..<5 {
            // New scans each round: a scan's id is unique in a spool.
            raw.append(
                SpoolBenchmark.rawInserts(
                    SpoolBenchmark.makeScans(commits), path: "\(directory)/bench-model-raw-\(round).sqlite"))
            for (index, (_, spool)) in spools.enumerated() {
                rates[index].append(insertRate(spool, SpoolBenchmark.makeScans(commits)))
            }
        }
        return zip(spools, rates).map { entry, values in
            BenchRow(
                metric: "commits/s, \(entry.0.name), vs raw SQLite, median of 5",
                ours: SpoolBenchmark.median(values), baseline: SpoolBenchmark.median(raw), unit: "/s",
                goal: ">= 0.9 x raw SQLite")
        }
    }

    /// Commits per second; 0 when a commit fails (the figure would be meaningless).
    static func insertRate(_ spool: Spool, _ scans: [NewScan]) -> Double {
        let start = MonotonicClock.now()
        for scan in scans {
            guard (try? spool.insert([scan])) != nil else { return 0 }
        }
        return Double(scans.count) / (MonotonicClock.now() - start)
    }

    /// The migration to the `queueShaped` spool on a spool of `count` delivered scans (`SpoolScaleBenchmark.fill`):
    /// one transaction, as a schema step runs, with `synchronous = FULL`; the WAL it leaves before the checkpoint
    /// and the file's growth. (The rest of the API's state, attempts to kept response, is not moved here.)
    static func migrationRows(directory: String, count: Int) -> [BenchRow] {
        let path = "\(directory)/bench-model-\(count).sqlite"
        SpoolBenchmark.remove(path)
        defer { SpoolBenchmark.remove(path) }
        guard SpoolScaleBenchmark.fill(path, count: count) else {
            print("delivery model: cannot build a spool of \(count) scans")
            return []
        }
        let before = fileSize(path)
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { return [] }
        let start = MonotonicClock.now()
        let migrated =
            sqlite3_exec(
                db,
                """
                PRAGMA synchronous = FULL;
                BEGIN;
                INSERT INTO sinks (name) VALUES ('api');
                \(queueIdentifierColumn)
                INSERT INTO sink_queue (sink, seq, state, delivered_at, identifier)
                    SELECT 'api', seq, CASE state WHEN 'delivered' THEN 'delivered' WHEN 'dead' THEN 'refused'
                        ELSE 'pending' END, delivered_at, identifier
                    FROM scans WHERE state != 'unrecognized';
                \(queueIndexesAndTrigger)
                COMMIT;
                """, nil, nil, nil) == SQLITE_OK
        let seconds = MonotonicClock.now() - start
        // Before this connection, the last, closes (which checkpoints and removes the WAL).
        let wal = fileSize(path + "-wal")
        let checkpointed = sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nil, nil, nil) == SQLITE_OK
        sqlite3_close(db)
        guard migrated, checkpointed else {
            print("delivery model: the migration failed")
            return []
        }
        let after = fileSize(path)
        let scans = count.formatted()
        return [
            BenchRow(
                metric: "migration of \(scans) scans' API state into sink_queue, s", ours: seconds, baseline: nil,
                unit: "s", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "WAL that migration leaves before its checkpoint, MB", ours: Double(wal) / 1e6,
                baseline: nil, unit: "MB", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "spool file after the migration against before, MB", ours: Double(after) / 1e6,
                baseline: Double(before) / 1e6, unit: "MB", goal: "info", higherIsBetter: false),
        ]
    }

    static func execute(_ path: String, _ sql: String) -> Bool {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { return false }
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5000)
        return sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK
    }

    static func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}
