import Foundation
import Platform

/// One row of the results table: metric, this project, baseline, ratio, goal.
struct BenchRow {
    var metric: String
    var ours: Double
    var baseline: Double?
    var unit: String
    /// Human goal, e.g. ">= 0.9 of baseline".
    var goal: String
    /// True when a higher value is better (throughput); false for latencies.
    var higherIsBetter = true

    var ratio: Double? { baseline.map { ours / $0 } }
}

enum BenchTable {
    static func machine() -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let memory = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
        var commit = "unknown"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/git")
        process.arguments = ["rev-parse", "--short", "HEAD"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        if (try? process.run()) != nil {
            process.waitUntilExit()
            let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            commit = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return "\(cores) cores, \(String(format: "%.0f", memory)) GiB, commit \(commit), \(Date())"
    }

    static func format(_ value: Double) -> String {
        if value >= 100 { return String(format: "%.0f", value) }
        if value >= 1 { return String(format: "%.2f", value) }
        return String(format: "%.4f", value)
    }

    /// `plings-bench all` collects every benchmark's rows and prints them as one table at the end.
    static let collected = Mutex<[BenchRow]?>(nil)

    static func print(_ rows: [BenchRow]) {
        let collecting = collected.withLock { list -> Bool in
            guard list != nil else { return false }
            list?.append(contentsOf: rows)
            return true
        }
        if collecting { return }
        printTable(rows)
    }

    static func printTable(_ rows: [BenchRow]) {
        Swift.print("machine: \(machine())")
        Swift.print("| metric | this project | baseline | ratio | goal |")
        Swift.print("|---|---|---|---|---|")
        for row in rows {
            let baseline = row.baseline.map { format($0) + " " + row.unit } ?? "-"
            let ratio = row.ratio.map { String(format: "%.2f", $0) } ?? "-"
            Swift.print("| \(row.metric) | \(format(row.ours)) \(row.unit) | \(baseline) | \(ratio) | \(row.goal) |")
        }
    }
}

/// A base58-valid identifier for benchmark reads (digit 0 and the letters O, I, l are not base58).
func benchIdentifier(_ prefix: String, _ n: Int) -> String {
    let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789")
    var value = n
    var text = ""
    repeat {
        text.append(alphabet[value % alphabet.count])
        value /= alphabet.count
    } while value > 0
    return prefix + text
}
