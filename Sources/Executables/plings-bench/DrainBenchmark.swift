import Bridge
import BridgeCore
import BridgeTestSupport
import PlingsAPI
import Foundation
import Logging
import Spool
import Platform
import SinkKit
import SourceKit

/// Drain throughput of a spooled backlog against the API stand-in, against a baseline client doing the same
/// POSTs as fast as it can (Tests/Rigs/api_baseline_client.py) with the same concurrency, in one run: with the
/// stand-in answering at once (the stand-in is then the ceiling for both), and with it answering after 50 ms (a
/// gate on a cellular link), where batched requests (docs/contracts.md, "Batched request") carry the backlog.
/// Also the time and peak RSS of draining a large backlog (RSS must stay flat).
enum DrainBenchmark {
    static func run(arguments: [String]) {
        var count = 10_000
        var large = 100_000
        var concurrency = 4
        var batchSize = APIConfig().batchSize
        var delay = 0.05
        var slowBaselineCount = 1000
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--count": count = Int(arguments[i + 1]) ?? count
            case "--large": large = Int(arguments[i + 1]) ?? large
            case "--concurrency": concurrency = Int(arguments[i + 1]) ?? concurrency
            case "--batch-size": batchSize = Int(arguments[i + 1]) ?? batchSize
            case "--delay": delay = (Double(arguments[i + 1]) ?? delay * 1000) / 1000
            case "--slow-baseline-count": slowBaselineCount = Int(arguments[i + 1]) ?? slowBaselineCount
            default: break
            }
            i += 2
        }
        let rigs = Products.packageRoot.appendingPathComponent("Tests/Rigs").path
        let dir = NSTemporaryDirectory() + "plings-drain-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokenFile = dir + "/token"
        FileManager.default.createFile(atPath: tokenFile, contents: Data("bench-token\n".utf8))

        guard let (api, port) = startStandIn(rigs: rigs, tokenFile: tokenFile, records: 1000) else {
            print("cannot start the API stand-in (is graphql-core installed? run scripts/setup)")
            exit(1)
        }
        defer { api.terminate() }
        let url = "http://127.0.0.1:\(port)/graphql"

        // Baseline first, then ours, then the baseline again; the figure is the mean of the two baselines so
        // a drifting machine does not favour either side.
        let baseline1 = baseline(rigs: rigs, url: url, tokenFile: tokenFile, count: count, concurrency: concurrency)
        let ours = drain(
            count: count, concurrency: concurrency, batchSize: batchSize, url: url, dir: dir, label: "small")
        let baseline2 = baseline(rigs: rigs, url: url, tokenFile: tokenFile, count: count, concurrency: concurrency)
        let baselineRate = (baseline1 + baseline2) / 2
        // The stand-in answers every request after `delay` (its `slow` mode): the round trip, not the server,
        // limits one-scan-per-request clients. The baseline's rate is per second, so fewer scans measure it.
        setMode(port: port, ["mode": "slow", "delay": delay])
        let slowBaseline = baseline(
            rigs: rigs, url: url, tokenFile: tokenFile, count: slowBaselineCount, concurrency: concurrency)
        let slow = drain(
            count: count, concurrency: concurrency, batchSize: batchSize, url: url, dir: dir, label: "slow")
        let slowSingles = drain(
            count: slowBaselineCount, concurrency: concurrency, batchSize: 1, url: url, dir: dir, label: "slow-1")
        setMode(port: port, ["mode": "ok"])
        let big = drain(
            count: large, concurrency: concurrency, batchSize: batchSize, url: url, dir: dir, label: "large")
        let ms = Int((delay * 1000).rounded())

        BenchTable.print([
            BenchRow(
                metric: "drain \(count) spooled scans, concurrency \(concurrency), batches of \(batchSize)",
                ours: ours.rate, baseline: baselineRate, unit: "/s", goal: ">= 1.0 x baseline client"),
            BenchRow(
                metric: "drain \(count) spooled scans, API answering after \(ms) ms, batches of \(batchSize)",
                ours: slow.rate, baseline: slowBaseline, unit: "/s", goal: ">= 10 x baseline client"),
            BenchRow(
                metric: "drain \(slowBaselineCount) spooled scans, API answering after \(ms) ms, one per request",
                ours: slowSingles.rate, baseline: slowBaseline, unit: "/s", goal: "info"),
            BenchRow(
                metric: "drain \(large) spooled scans: time", ours: big.seconds, baseline: nil, unit: "s",
                goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "RSS growth over the \(large)-scan drain (after the first 10%)", ours: big.rssGrowthMB,
                baseline: nil, unit: "MB", goal: "flat (< 5 MB)", higherIsBetter: false),
        ])
    }

    static func startStandIn(rigs: String, tokenFile: String, records: Int) -> (Process, Int)? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            rigs + "/api_standin.py", "--port", "0", "--token-file", tokenFile,
            "--record-limit", String(records),
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        var line = Data()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { return nil }
            if byte == Data([0x0A]) { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("READY port="), let port = Int(text.dropFirst("READY port=".count)) else { return nil }
        return (process, port)
    }

    /// Sets the stand-in's fault mode (Tests/Rigs/README-api.md, `POST /_control/mode`).
    static func setMode(port: Int, _ mode: [String: Any]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        let body = (try? JSONSerialization.data(withJSONObject: mode)).map { String(decoding: $0, as: UTF8.self) }
        process.arguments = [
            "-s", "-o", "/dev/null", "-X", "POST", "--data-binary", body ?? "{}",
            "http://127.0.0.1:\(port)/_control/mode",
        ]
        guard (try? process.run()) != nil else { return }
        process.waitUntilExit()
    }

    static func baseline(rigs: String, url: String, tokenFile: String, count: Int, concurrency: Int) -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            rigs + "/api_baseline_client.py", "--url", url, "--token-file", tokenFile,
            "--count", String(count), "--concurrency", String(concurrency),
        ]
        let out = Pipe()
        process.standardOutput = out
        guard (try? process.run()) != nil else { return 0 }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let json = try? JSONParser.parse([UInt8](data).filter { $0 != 0x0A })
        return json?["perSecond"]?.doubleValue ?? 0
    }

    struct DrainResult {
        var rate: Double
        var seconds: Double
        var rssGrowthMB: Double
    }

    /// Spools `count` scans (not timed), then times the API sink (`QueuedSink`) draining them all.
    static func drain(count: Int, concurrency: Int, batchSize: Int, url: String, dir: String, label: String)
        -> DrainResult
    {
        let path = dir + "/\(label).sqlite"
        guard let spool = try? Spool(path: path, synchronous: .normal) else {
            return DrainResult(rate: 0, seconds: 0, rssGrowthMB: 0)
        }
        let builder = ScanBuilder(parser: PlingsURLParser())
        var batch: [NewScan] = []
        for n in 0..<count {
            let read = Read(
                sourceKind: SourceKind("hid"), device: "bench",
                raw: "https://s.plings.io/?t=q&i=\(benchIdentifier("D", n % 97))&p=1.\(n)", time: Date())
            batch.append(builder.build(read, fix: LocationFix(latitude: 59.3, longitude: 18.0, accuracy: 5)))
            if batch.count == 1000 {
                try? spool.insert(batch)
                batch.removeAll()
            }
        }
        try? spool.insert(batch)
        let settings = APISettings(
            url: url, token: "bench-token", document: GraphQLRequestBody.defaultDocument, timeout: 10,
            concurrency: concurrency, batchSize: batchSize, allowInsecureHTTP: true, userAgent: BridgeVersion.userAgent)
        guard let forwarder = QueuedSink(.api, settings: settings, spool: spool, logger: Logger(minimum: .error)) else {
            return DrainResult(rate: 0, seconds: 0, rssGrowthMB: 0)
        }
        let start = MonotonicClock.now()
        forwarder.start()
        var rssAfterWarmup: Double?
        var rssMax = 0.0
        while true {
            // Progress is polled every 50 ms: this is the benchmark's own clock, not the product's.
            usleep(50_000)
            let delivered = forwarder.currentStats.delivered
            let rss = residentMB()
            if rssAfterWarmup == nil, delivered >= count / 10 { rssAfterWarmup = rss }
            if rssAfterWarmup != nil { rssMax = max(rssMax, rss) }
            if delivered + forwarder.currentStats.dead >= count { break }
            if forwarder.currentStats.attempts > 0, (try? spool.stats().counts[.pending]) == 0 { break }
            if MonotonicClock.now() - start > 3600 { break }
        }
        let seconds = MonotonicClock.now() - start
        forwarder.stop()
        return DrainResult(
            rate: Double(count) / seconds, seconds: seconds, rssGrowthMB: max(0, rssMax - (rssAfterWarmup ?? rssMax)))
    }

    static func residentMB() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
    }
}
