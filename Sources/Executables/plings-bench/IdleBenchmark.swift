import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import Platform
import Spool

/// `plings-bench idle`: how often an idle `plings-bridge run` (no systemd, so no watchdog) is woken, counted as the
/// context switches of all its threads over a window (issue 27: an idle box sleeps), in each state a gate sits in
/// for hours; and how soon a scan spooled by another process (`scan`) reaches the API once the service no longer
/// looks at the spool on a timer. `--baseline-bridge PATH` measures another build (the commit before) in the same
/// run as the baseline; without it there is none.
enum IdleBenchmark {
    struct State {
        var label: String
        var arguments: [String]
        var environment: [String: String] = [:]
        /// Time to let start-up settle (NFC's retries of an absent pcscd lengthen to their longest wait).
        var warmup: Double
        var goal: Double
    }

    static func run(arguments: [String]) {
        var seconds = 30.0
        // Another build of `plings-bridge` (an older commit's) measured in the same run as the baseline.
        var baselineBridge: String?
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--seconds": seconds = Double(arguments[i + 1]) ?? seconds
            case "--baseline-bridge": baselineBridge = arguments[i + 1]
            default: break
            }
            i += 2
        }
        let bridge = Products.path("plings-bridge")
        let dir = NSTemporaryDirectory() + "plings-idle-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokenFile = dir + "/token"
        FileManager.default.createFile(atPath: tokenFile, contents: Data("bench-token-0123456789\n".utf8))
        guard let (api, port) = DrainBenchmark.startStandIn(rigs: Products.rig(""), tokenFile: tokenFile, records: 100)
        else {
            print("cannot start the API stand-in (is graphql-core installed? run scripts/setup)")
            exit(1)
        }
        defer { api.terminate() }
        let config = dir + "/api.json"
        let apiConfig = JSONValue.object([
            (
                "api",
                .object([
                    ("url", .string("http://127.0.0.1:\(port)/graphql")), ("allowInsecureHTTP", .bool(true)),
                    ("tokenFile", .string(tokenFile)),
                ])
            )
        ]).encoded()
        FileManager.default.createFile(atPath: config, contents: Data(apiConfig.utf8))

        let off = ["--no-nfc", "--no-hid", "--no-hidpos", "--no-serial", "--no-location"]
        func only(_ kind: String) -> [String] { off.filter { $0 != "--no-\(kind)" } }
        let states = [
            State(label: "no source", arguments: off, warmup: 3, goal: 2),
            State(label: "HID source, no scanner plugged", arguments: only("hid"), warmup: 3, goal: 3),
            State(
                label: "NFC source, pcscd absent", arguments: only("nfc"),
                environment: ["PCSCLITE_CSOCK_NAME": dir + "/no-pcscd/pcscd.comm"], warmup: 40,
                goal: 3),
            State(
                label: "API configured, nothing to send", arguments: off + ["--config", config], warmup: 3, goal: 3),
        ]
        var rows: [BenchRow] = []
        for (n, state) in states.enumerated() {
            let count = wakeUps(bridge: bridge, state: state, spool: dir + "/idle-\(n).sqlite", seconds: seconds)
            let baseline = baselineBridge.map {
                Double(wakeUps(bridge: $0, state: state, spool: dir + "/idle-\(n)-baseline.sqlite", seconds: seconds))
            }
            rows.append(
                BenchRow(
                    metric: "wake-ups in \(Int(seconds)) s idle: \(state.label)", ours: Double(count),
                    baseline: baseline, unit: "", goal: "<= \(Int(state.goal))", higherIsBetter: false))
        }
        let pickup = pickupLatency(bridge: bridge, config: config, dir: dir, label: "ours")
        let oldPickup = baselineBridge.map { pickupLatency(bridge: $0, config: config, dir: dir, label: "baseline") }
        rows.append(
            BenchRow(
                metric: "a scan spooled by another process -> sent to the API, median of \(pickup.samples)",
                ours: pickup.median * 1000, baseline: oldPickup.map { $0.median * 1000 }, unit: "ms",
                goal: "< 100 ms", higherIsBetter: false))
        BenchTable.print(rows)
    }

    /// The context switches of the service's threads over `seconds`, after its warm-up.
    static func wakeUps(bridge: String, state: State, spool: String, seconds: Double) -> Int {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(state.environment) { $1 }
        environment["STATE_DIRECTORY"] = (spool as NSString).deletingLastPathComponent
        guard
            let process = try? RunningProcess(
                bridge, ["run", "--spool", spool] + state.arguments, environment: environment)
        else { return -1 }
        defer { process.stop() }
        guard process.waitForLogLine(timeout: 10, where: { $0.contains("ready: waiting for reads") }) != nil else {
            print("idle: the bridge did not become ready (\(state.label)): \(process.stderrText)")
            return -1
        }
        MonotonicClock.sleep(seconds: state.warmup)
        let before = process.contextSwitchesByThread
        MonotonicClock.sleep(seconds: seconds)
        // Per thread: a thread that ended meanwhile (libdispatch retires idle workers) takes its count with it.
        return process.contextSwitchesByThread.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }
    }

    /// From a read by `scan` in another process (no API of its own: it only spools) to the running service's
    /// delivery, as the spool records both. The old service looked at the spool every 2 s: 1 s on average.
    static func pickupLatency(bridge: String, config: String, dir: String, label: String) -> (
        median: Double, samples: Int
    ) {
        let spoolPath = dir + "/pickup-\(label).sqlite"
        guard
            let service = try? RunningProcess(
                bridge,
                ["run", "--spool", spoolPath, "--config", config]
                    + ["--no-nfc", "--no-hid", "--no-hidpos", "--no-serial", "--no-location"])
        else { return (.nan, 0) }
        defer { service.stop() }
        guard service.waitForLogLine(timeout: 10, where: { $0.contains("ready: waiting for reads") }) != nil,
            let spool = try? Spool(path: spoolPath)
        else { return (.nan, 0) }
        let empty = dir + "/empty.json"
        FileManager.default.createFile(atPath: empty, contents: Data("{}".utf8))
        var latencies: [Double] = []
        for n in 0..<20 {
            // Base58 identifiers (no 0, O, I, l): ten of them, two scans each.
            let url = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVW\(Array("123456789A")[n % 10])&p=9.\(n + 1)"
            guard
                let scan = try? ProcessRunner.run(
                    bridge, ["scan", url, "--config", empty, "--spool", spoolPath, "--no-location"]),
                scan.status == 0,
                let id = try? JSONParser.parse(scan.stdout.trimmingASCIIWhitespace())["id"]?.stringValue
            else {
                print("idle: a scan was not spooled (\(label))")
                continue
            }
            // The read's time (taken by `scan` before its commit) to the delivery the service recorded: both wall
            // clock, on this machine.
            let deadline = MonotonicClock.deadline(after: 5)
            var record = try? spool.record(id: id)
            while MonotonicClock.now() < deadline, record?.state != .delivered {
                MonotonicClock.sleep(seconds: 0.005)
                record = try? spool.record(id: id)
            }
            guard let record, record.state == .delivered, let sent = record.deliveredAt else {
                print("idle: scan \(id) not delivered within 5 s (\(label)): \(record?.state.rawValue ?? "gone")")
                continue
            }
            latencies.append(sent.timeIntervalSince(record.createdAt))
        }
        latencies.sort()
        return (latencies.isEmpty ? .nan : latencies[latencies.count / 2], latencies.count)
    }
}
