import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import HTTPInterface
import Logging
import Platform
import SinkKit
import SourceKit
import ReadPipeline
import Spool

/// `plings-bench http`: the local interface beside the pipeline (issue 25). Read -> committed with the interface
/// on and no client (the baseline) and with 50 `/events` clients of which one never reads (goal: within noise);
/// commit -> event at the SSE clients (Tests/Rigs/http/sse_clients.py, separate processes, CLOCK_MONOTONIC on
/// both sides); the process's RSS with 50 clients against none; and, with `--browser`, commit -> row on the bench
/// page in headless Chromium (Tests/Rigs/http/browser_check.py against the real `plings-bridge`); with `--flood`,
/// the real `plings-bridge` under issue 42's flood (Tests/Rigs/http/flood.py: 2,000 idle connections, 200 streams
/// of which 50 never read, 100 one-byte-a-second headers, a read every 100 ms by `plings-bridge scan`).
enum HTTPBenchmark {
    static func run(arguments: [String]) {
        var samples = 300
        var clients = 50
        var browser = false
        var flood = false
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--samples" where i + 1 < arguments.count:
                samples = Int(arguments[i + 1]) ?? samples
                i += 1
            case "--clients" where i + 1 < arguments.count:
                clients = Int(arguments[i + 1]) ?? clients
                i += 1
            case "--browser": browser = true
            case "--flood": flood = true
            default: break
            }
            i += 1
        }
        let dir = TemporaryDirectory("plings-bench-http")
        defer { dir.remove() }
        guard let spool = try? Spool(path: dir.file("spool.sqlite")), let port = try? freePort() else {
            print("error: cannot make the spool or find a free port")
            exit(1)
        }
        var config = BridgeConfig()
        config.http.listen = "127.0.0.1:\(port)"
        let logger = Logger(minimum: .error)
        let board = StatusBoard()
        board.publish(status: .object([("bench", .bool(true))]), metrics: "", device: .null)
        let sink = ScanSinkModule.http.make(
            SinkContext(
                spool: spool, logger: logger, configuration: SinkConfiguration(config: config, apiToken: nil),
                board: board))
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: NoFixProvider(),
            debounce: [:], logger: logger, onCommitted: { _ in sink.wake() })
        sink.start()
        pipeline.start()
        defer {
            pipeline.stop()
            sink.stop(deadline: MonotonicClock.deadline(after: 5))
        }
        let rssBefore = residentKiB()
        // Reads 2 ms apart (a stress: each commit meets the previous one's fan-out to every client) and 50 ms apart
        // (a fast scanner at a bench).
        _ = commitLatencies(pipeline, samples: 50, tag: "W", interval: 0.002)  // warm-up: caches, the WAL's first pages
        let alone = commitLatencies(pipeline, samples: samples, tag: "A", interval: 0.002)
        let aloneSpaced = commitLatencies(pipeline, samples: samples / 3, tag: "D", interval: 0.05)
        // 49 reading clients and one that never reads, all connected for the second round.
        let reading = max(1, clients - 1)
        // The clients run at the lowest priority: on a bench they are browsers on other machines, and here their
        // Python would otherwise take the pipeline's core (2 cores) and be measured as the interface's cost.
        guard
            let process = try? RunningProcess(
                "/usr/bin/nice",
                [
                    "-n", "19", "/usr/bin/python3", Products.rig("http/sse_clients.py"),
                    "http://127.0.0.1:\(port)/events", "--clients", String(reading), "--stalled", "1",
                ])
        else {
            print("error: cannot start the SSE clients (python3)")
            exit(1)
        }
        defer { process.stop() }
        guard process.waitForLineCount(1 + reading, timeout: 20) else {
            print("error: the SSE clients did not connect: \(process.stderrText)")
            exit(1)
        }
        let crowded = commitLatencies(pipeline, samples: samples, tag: "B", interval: 0.002)
        let crowdedSpaced = commitLatencies(pipeline, samples: samples / 3, tag: "E", interval: 0.05)
        let expectedEvents = reading * (samples + samples / 3)
        _ = eventually(timeout: 20) { process.outputLines.count >= 1 + reading + expectedEvents }
        let rssWith = residentKiB()
        process.stop()
        // None again: how far two rounds without clients differ is the noise.
        let again = commitLatencies(pipeline, samples: samples, tag: "C", interval: 0.002)
        // Commit -> event, per client and scan.
        var toEvent: [Double] = []
        for line in process.outputLines {
            guard let record = try? JSONParser.parse(Array(line.utf8)), case .number(let t)? = record["t"],
                case .string(let data)? = record["data"], let scan = try? JSONParser.parse(Array(data.utf8)),
                case .string(let id)? = scan["id"],
                let committed = crowded.committedAt[id] ?? crowdedSpaced.committedAt[id]
            else { continue }
            toEvent.append(t - committed)
        }
        var rows = [
            BenchRow(
                metric:
                    "read -> committed, reads 2 ms apart, median of \(samples), \(clients) /events clients (one stalled) vs none",
                ours: median(crowded.latencies) * 1000, baseline: median(alone.latencies) * 1000, unit: "ms",
                goal: "within noise", higherIsBetter: false),
            BenchRow(
                metric: "read -> committed, reads 50 ms apart, median of \(samples / 3), \(clients) clients vs none",
                ours: median(crowdedSpaced.latencies) * 1000, baseline: median(aloneSpaced.latencies) * 1000,
                unit: "ms", goal: "within noise", higherIsBetter: false),
            BenchRow(
                metric: "read -> committed, median, no client: a second round vs the first (the noise)",
                ours: median(again.latencies) * 1000, baseline: median(alone.latencies) * 1000, unit: "ms",
                goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "read -> committed, p99, \(clients) clients vs none", ours: p99(crowded.latencies) * 1000,
                baseline: p99(alone.latencies) * 1000, unit: "ms", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "commit -> event at an SSE client, median (\(toEvent.count) of \(expectedEvents) events)",
                ours: median(toEvent) * 1000, baseline: nil, unit: "ms", goal: "< 1000 ms", higherIsBetter: false),
            BenchRow(
                metric: "commit -> event at an SSE client, p99", ours: p99(toEvent) * 1000, baseline: nil, unit: "ms",
                goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "RSS with \(clients) clients (one stalled) vs none", ours: Double(rssWith) / 1024,
                baseline: Double(rssBefore) / 1024, unit: "MiB", goal: "info", higherIsBetter: false),
        ]
        if browser, let page = commitToPage(dir: dir) {
            rows.append(
                BenchRow(
                    metric: "commit -> row on the bench page (headless Chromium, one scan)", ours: page * 1000,
                    baseline: nil, unit: "ms", goal: "< 1000 ms", higherIsBetter: false))
        }
        if flood { rows += floodRows(dir: dir) }
        BenchTable.print(rows)
    }

    /// Issue 42's flood against the real bridge: its figures as rows (nothing when the rig could not run).
    static func floodRows(dir: TemporaryDirectory) -> [BenchRow] {
        guard let port = try? freePort() else { return [] }
        let config = dir.file("flood.json")
        let spool = dir.file("flood.sqlite")
        let text = """
            {"http": {"listen": "127.0.0.1:\(port)"}, "nfc": {"enabled": false}, "hid": {"enabled": false},
             "hidpos": {"enabled": false}, "serial": {"enabled": false}, "location": {"enabled": false}}
            """
        let binary = Products.path("plings-bridge")
        guard FileManager.default.createFile(atPath: config, contents: Data(text.utf8)),
            let bridge = try? RunningProcess(binary, ["run", "--config", config, "--spool", spool])
        else { return [] }
        defer { bridge.stop() }
        guard bridge.waitForLogLine(timeout: 15, where: { $0.contains("the local interface is up") }) != nil else {
            print("error: the bridge did not listen: \(bridge.stderrText)")
            return []
        }
        let scan = JSONValue.array(
            [binary, "scan", "{code}", "--device", "bench-1", "--config", config, "--spool", spool].map(
                JSONValue.string)
        ).encoded()
        guard
            let result = try? ProcessRunner.run(
                "/usr/bin/python3",
                [
                    Products.rig("http/flood.py"), String(port), String(bridge.process.processIdentifier),
                    "--scan-command", scan,
                ], timeout: 240),
            let seen = try? JSONParser.parse(Array(result.stdout.utf8))
        else {
            print("error: the flood rig failed")
            return []
        }
        func number(_ key: String) -> Double {
            switch seen[key] {
            case .integer(let n)?: return Double(n)
            case .number(let n)?: return n
            default: return .nan
            }
        }
        var stalled: [Double] = []
        if case .array(let items)? = seen["stalledClosedAfter"] {
            for case .number(let n) in items { stalled.append(n + 10) }
        }
        return [
            BenchRow(
                metric: "flood: /healthz probes answered within 1 s (of 20)", ours: number("probesOK"), baseline: nil,
                unit: "", goal: ">= 19", higherIsBetter: true),
            BenchRow(
                metric: "flood: `scan` to committed, median, flooded vs quiet", ours: number("scanFloodedMs"),
                baseline: number("scanQuietMs"), unit: "ms", goal: "within noise", higherIsBetter: false),
            BenchRow(
                metric: "flood: the bridge's threads, flooded vs before", ours: number("threadsPeak"),
                baseline: number("threadsBefore"), unit: "", goal: "no growth", higherIsBetter: false),
            BenchRow(
                metric: "flood: the bridge's RSS, peak flooded vs before", ours: number("rssKiBPeak") / 1024,
                baseline: number("rssKiBBefore") / 1024, unit: "MiB", goal: "< +64 MiB", higherIsBetter: false),
            BenchRow(
                metric: "flood: a stream never read, cut after (median, from connecting)", ours: median(stalled),
                baseline: nil, unit: "s", goal: "60-70 s", higherIsBetter: false),
        ]
    }

    struct Round {
        var latencies: [Double] = []
        /// Scan id -> when its commit completed (CLOCK_MONOTONIC).
        var committedAt: [String: Double] = [:]
    }

    /// One read at a time, each timed from `submit` to the pipeline's completion (committed).
    static func commitLatencies(_ pipeline: Pipeline, samples: Int, tag: String, interval: Double) -> Round {
        var round = Round()
        for n in 0..<samples {
            let done = Monitor<(Double, String)?>(nil)
            let start = MonotonicClock.now()
            pipeline.submit(
                Read(
                    sourceKind: SourceKind("hid"), device: "bench",
                    raw: "https://s.plings.io/?t=q&i=Http\(tag)\(n)x&p=4.2.\(n)", time: Date())
            ) { outcome in
                if case .accepted(let scan) = outcome { done.update { $0 = (MonotonicClock.now(), scan.id) } }
            }
            var result: (Double, String)?
            _ = done.wait(until: MonotonicClock.deadline(after: 5)) { state in
                result = state
                return state != nil
            }
            guard let (end, id) = result else { continue }
            round.latencies.append(end - start)
            round.committedAt[id] = end
            MonotonicClock.sleep(seconds: interval)
        }
        return round
    }

    /// Runs the browser check against the real bridge and returns its commit -> page time.
    static func commitToPage(dir: TemporaryDirectory) -> Double? {
        guard let port = try? freePort() else { return nil }
        let config = dir.file("browser.json")
        let text = """
            {"http": {"listen": "127.0.0.1:\(port)"}, "nfc": {"enabled": false}, "hid": {"enabled": false},
             "hidpos": {"enabled": false}, "serial": {"enabled": false}, "location": {"enabled": false}}
            """
        guard FileManager.default.createFile(atPath: config, contents: Data(text.utf8)),
            let result = try? ProcessRunner.run(
                "/usr/bin/python3",
                [
                    Products.rig("http/browser_check.py"), "--bridge", Products.path("plings-bridge"), "--config",
                    config, "--spool", dir.file("browser.sqlite"), "--url", "http://127.0.0.1:\(port)/",
                    "--screenshot", dir.file("page.png"),
                ], timeout: 180),
            let report = result.stdoutLines.last.flatMap({ try? JSONParser.parse(Array($0.utf8)) }),
            case .number(let seconds)? = report["commitToPageSeconds"]
        else { return nil }
        return seconds
    }

    static func freePort() throws -> Int {
        let socket = try ListeningSocket()
        defer { socket.close() }
        return socket.port
    }

    static func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    static func p99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
    }
}
