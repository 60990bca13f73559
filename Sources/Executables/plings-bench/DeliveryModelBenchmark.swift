import BridgeCore
import Foundation
import Platform
import Spool

/// The migration to one delivery model (schema 8: the API's delivery state moves from `scans` into `sink_queue`)
/// on a spool an older release left with a year of scans: how long the first open of the new build stalls, the
/// WAL it leaves behind, and the file's growth. The commit's cost on the new schema is `plings-bench spool`'s.
enum DeliveryModelBenchmark {
    static func run(arguments: [String]) {
        var count = 1_000_000
        var directory = NSTemporaryDirectory()
        var i = 0
        while i + 1 < arguments.count {
            if arguments[i] == "--count", let n = Int(arguments[i + 1]) { count = n }
            if arguments[i] == "--dir" { directory = arguments[i + 1] }
            i += 2
        }
        BenchTable.print(migrationRows(directory: directory, count: count))
    }

    /// A schema-7 spool of `count` delivered scans, opened by this build (`Spool(path:)`, which migrates it as
    /// `run` does at start), then the migration's own figures.
    static func migrationRows(directory: String, count: Int) -> [BenchRow] {
        let path = "\(directory)/bench-model-\(count).sqlite"
        SpoolBenchmark.remove(path)
        defer { SpoolBenchmark.remove(path) }
        let older = 7
        guard SpoolScaleBenchmark.fillOlder(path, version: older, count: count) else {
            print("delivery model: cannot build a schema-\(older) spool of \(count) scans")
            return []
        }
        let before = fileSize(path)
        let start = MonotonicClock.now()
        guard let spool = try? Spool(path: path), let step = spool.migration, step.from == older else {
            print("delivery model: the migration failed")
            return []
        }
        let seconds = MonotonicClock.now() - start
        let wal = fileSize(path + "-wal")
        let counts = (try? spool.stats().counts) ?? [:]
        guard counts == [.delivered: count] else {
            print("delivery model: after the migration the counts are \(counts), not \(count) delivered")
            return []
        }
        let after = fileSize(path)
        let scans = count.formatted()
        return [
            BenchRow(
                metric: "first open migrating \(scans) scans to one delivery model, s", ours: seconds, baseline: nil,
                unit: "s", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "WAL that open leaves behind, MB", ours: Double(wal) / 1e6, baseline: nil, unit: "MB",
                goal: "< 16.8 (Spool.walTrimBytes)", higherIsBetter: false),
            BenchRow(
                metric: "spool file after the migration against before, MB", ours: Double(after) / 1e6,
                baseline: Double(before) / 1e6, unit: "MB", goal: "info", higherIsBetter: false),
        ]
    }

    static func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}
