import BridgeCore
import BridgeTestSupport
import CSQLite
import Foundation
import Platform
import Spool

/// A year of scans costs what a day does (issue 22): commit latency and CLI times on spools of 0, 100,000 and
/// 1,000,000 scans, each against the empty spool's figure, and the longest commit stall while `spool purge`
/// deletes 600,000 of them.
enum SpoolScaleBenchmark {
    static func run(arguments: [String]) {
        var sizes = [0, 100_000, 1_000_000]
        var directory = NSTemporaryDirectory()
        var i = 0
        while i + 1 < arguments.count {
            if arguments[i] == "--sizes" {
                sizes = arguments[i + 1].split(separator: ",").compactMap { Int($0) }
            }
            if arguments[i] == "--dir" { directory = arguments[i + 1] }
            i += 2
        }
        let binary = Products.path("plings-bridge")
        var rows: [BenchRow] = []
        var empty: [String: Double] = [:]
        for size in sizes {
            let path = "\(directory)/bench-scale-\(size).sqlite"
            SpoolBenchmark.remove(path)
            defer { SpoolBenchmark.remove(path) }
            guard fill(path, count: size) else {
                print("spool scale: cannot build a spool of \(size) scans")
                return
            }
            var figures: [(String, Double)] = []
            figures.append(("commit, median ms", commitLatency(path, samples: 200)))
            for (name, command) in [
                ("`scan`", ["scan", "--no-location", "https://s.plings.io/?t=q&i=\(benchIdentifier("Scale", 1))&p=1"]),
                ("`spool stats`", ["spool", "stats"]),
                ("`spool list --last 100`", ["spool", "list", "--last", "100"]),
            ] {
                figures.append((name + ", median ms", cliTime(binary, command + ["--spool", path])))
            }
            figures.append(("status refresh (spool and sink stats), median ms", statusWork(path)))
            for (name, value) in figures {
                if size == 0 { empty[name] = value }
                let baseline = empty[name] ?? value
                rows.append(
                    BenchRow(
                        metric: "spool of \(size.formatted()) scans: \(name)", ours: value, baseline: baseline,
                        unit: "ms", goal: size == 0 ? "info" : "<= 2 x the empty spool", higherIsBetter: false))
            }
        }
        if let largest = sizes.max(), largest >= 600_000 {
            rows += purgeStall(directory: directory, size: largest, purge: 600_000)
        }
        BenchTable.print(rows)
    }

    /// A spool of `count` delivered scans, 30 s apart over the last `count` x 30 s: made with one SQL statement
    /// (the spool's own schema, opened and migrated by `Spool` first), then checkpointed and its WAL truncated,
    /// as a long-running box's would be.
    static func fill(_ path: String, count: Int) -> Bool {
        guard (try? Spool(path: path)) != nil else { return false }
        guard count > 0 else { return true }
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { return false }
        defer { sqlite3_close(db) }
        let sql = """
            PRAGMA synchronous = OFF;
            BEGIN;
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
            INSERT INTO scans (id, created_at, state, source_kind, device, raw, input, identifier, attempts,
                               delivered_at)
            SELECT printf('00000000-0000-4000-8000-%012d', i),
                strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', (\(count) - i) * 30 + 60)), 'delivered',
                'hid', 'bench', 'https://s.plings.io/?t=q&i=S' || (i % 5000) || '&p=4.2.3',
                '{"type":"q","identifier":"S' || (i % 5000) || '","path":"4.2.3"}', 'S' || (i % 5000), 1,
                strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', (\(count) - i) * 30))
            FROM n;
            COMMIT;
            PRAGMA wal_checkpoint(TRUNCATE);
            """
        return sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK
    }

    static func median(_ values: [Double]) -> Double { values.isEmpty ? .nan : values.sorted()[values.count / 2] }

    /// One durable commit of one scan, as the pipeline makes it after a tap.
    static func commitLatency(_ path: String, samples: Int) -> Double {
        guard let spool = try? Spool(path: path) else { return .nan }
        let scans = SpoolBenchmark.makeScans(samples)
        var times: [Double] = []
        for scan in scans {
            let start = MonotonicClock.now()
            try? spool.insert([scan])
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    /// A CLI command from process start to exit, median of 7.
    static func cliTime(_ binary: String, _ arguments: [String]) -> Double {
        var times: [Double] = []
        for _ in 0..<7 {
            let start = MonotonicClock.now()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return .nan }
            process.waitUntilExit()
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    /// What each refresh of `status.json` and the metrics reads from the spool.
    static func statusWork(_ path: String) -> Double {
        guard let spool = try? Spool(path: path) else { return .nan }
        var times: [Double] = []
        for _ in 0..<21 {
            let start = MonotonicClock.now()
            _ = try? spool.stats()
            _ = try? spool.sinkStats()
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    /// `purge` of the oldest `purge` scans of a spool of `size`, while another connection (a `scan`, the
    /// pipeline of another process) commits one scan every 10 ms: the longest of those commits, the purge's
    /// time, and the WAL's size afterwards.
    static func purgeStall(directory: String, size: Int, purge: Int) -> [BenchRow] {
        let path = "\(directory)/bench-scale-purge.sqlite"
        SpoolBenchmark.remove(path)
        defer { SpoolBenchmark.remove(path) }
        guard fill(path, count: size), let purger = try? Spool(path: path), let writer = try? Spool(path: path)
        else { return [] }
        let idle = commitLatency(path, samples: 100)
        let stop = Monitor(false)
        let longest = Mutex(0.0)
        let scans = SpoolBenchmark.makeScans(20_000)
        let thread = Thread {
            var n = 0
            while !stop.withLock({ $0 }), n < scans.count {
                let start = MonotonicClock.now()
                try? writer.insert([scans[n]])
                let took = (MonotonicClock.now() - start) * 1000
                longest.withLock { $0 = max($0, took) }
                n += 1
                stop.wait(until: MonotonicClock.deadline(after: 0.01)) { $0 }
            }
        }
        thread.start()
        // The fill spaced scans 30 s apart, newest now: the cutoff that leaves `size - purge` of them.
        let cutoff = Date().addingTimeInterval(-Double(size - purge) * 30 - 15)
        let start = MonotonicClock.now()
        let purged = (try? purger.purgeDelivered(before: cutoff)) ?? 0
        let seconds = MonotonicClock.now() - start
        stop.update { $0 = true }
        var info = stat()
        let wal = stat(path + "-wal", &info) == 0 ? Double(info.st_size) / 1_048_576 : 0
        return [
            BenchRow(
                metric: "purge of \(purged.formatted()) of \(size.formatted()) scans: longest concurrent commit",
                ours: longest.withLock { $0 }, baseline: idle, unit: "ms", goal: "< 100 ms", higherIsBetter: false),
            BenchRow(
                metric: "purge of \(purged.formatted()) scans: time (batches of \(Spool.purgeBatch))", ours: seconds,
                baseline: seconds, unit: "s", goal: "info"),
            BenchRow(
                metric: "purge of \(purged.formatted()) scans: WAL left afterwards", ours: wal, baseline: wal,
                unit: "MB",
                goal: "info"),
        ]
    }
}
