import Bridge
import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import MQTT
import Platform
import SinkKit
import SourceKit
import Spool

/// Drain of a spooled backlog to a real Mosquitto broker at QoS 1 against a baseline paho-mqtt client
/// (Tests/Rigs/mqtt_baseline_client.py) publishing the same messages with the same QoS and in-flight window, in
/// one run; and the peak RSS growth over a large drain (must stay flat).
enum MQTTBenchmark {
    static func run(arguments: [String]) {
        var count = 10_000
        var large = 100_000
        var inflight = 20
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--count": count = Int(arguments[i + 1]) ?? count
            case "--large": large = Int(arguments[i + 1]) ?? large
            case "--inflight": inflight = Int(arguments[i + 1]) ?? inflight
            default: break
            }
            i += 2
        }
        let dir = TemporaryDirectory("plings-bench-mqtt")
        defer { dir.remove() }
        let broker: MosquittoRig
        do {
            broker = try MosquittoRig()
        } catch {
            print("cannot start mosquitto (run scripts/setup): \(error)")
            exit(1)
        }
        let settings = MQTTSettings(
            host: "127.0.0.1", port: broker.port, tls: false, caFile: nil, certFile: nil, keyFile: nil, username: nil,
            password: nil, topicBase: "plings/bench/dev1", deviceID: "dev1", keepalive: 60, maxInflight: inflight)

        // The same messages for both: our spool's export lines, on the topics the sink uses.
        let small = fill(dir.file("small.sqlite"), count: count)
        let messages = dir.file("messages.txt")
        var text = ""
        try? small?.forEach { text += settings.topic(for: $0) + "\t" + $0.json().encoded() + "\n" }
        FileManager.default.createFile(atPath: messages, contents: Data(text.utf8))

        // Baseline, ours, baseline: the mean of the two baselines, so a drifting machine favours neither side.
        let baseline1 = baseline(port: broker.port, messages: messages, inflight: inflight)
        let ours = small.map { drain($0, count: count, settings: settings) } ?? DrainResult()
        let baseline2 = baseline(port: broker.port, messages: messages, inflight: inflight)
        let big = fill(dir.file("large.sqlite"), count: large).map { drain($0, count: large, settings: settings) }
        BenchTable.print([
            BenchRow(
                metric: "mqtt: drain \(count) spooled scans, QoS 1, in-flight \(inflight)", ours: ours.rate,
                baseline: (baseline1 + baseline2) / 2, unit: "/s", goal: ">= 1.0 x paho-mqtt client"),
            BenchRow(
                metric: "mqtt: drain \(large) spooled scans: time", ours: big?.seconds ?? 0, baseline: nil, unit: "s",
                goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "mqtt: RSS growth over the \(large)-scan drain (after the first 10%)",
                ours: big?.rssGrowthMB ?? 0, baseline: nil, unit: "MB", goal: "flat (< 5 MB)",
                higherIsBetter: false),
        ])
    }

    /// A spool with `count` scans queued for the MQTT sink (not timed).
    static func fill(_ path: String, count: Int) -> Spool? {
        guard let spool = try? Spool(path: path, synchronous: .normal), (try? spool.registerSink("mqtt")) != nil
        else { return nil }
        let builder = ScanBuilder(parser: PlingsURLParser())
        var batch: [NewScan] = []
        for n in 0..<count {
            let read = Read(
                sourceKind: SourceKind("hid"), device: "bench",
                raw: "https://s.plings.io/?t=q&i=\(benchIdentifier("M", n % 97))&p=1.\(n)", time: Date())
            batch.append(builder.build(read, fix: LocationFix(latitude: 59.3, longitude: 18.0, accuracy: 5)))
            if batch.count == 1000 {
                try? spool.insert(batch)
                batch.removeAll()
            }
        }
        try? spool.insert(batch)
        return spool
    }

    static func baseline(port: Int, messages: String, inflight: Int) -> Double {
        let result = try? ProcessRunner.run(
            "/usr/bin/python3",
            [
                Products.rig("mqtt_baseline_client.py"), "--port", String(port), "--messages", messages, "--inflight",
                String(inflight),
            ], timeout: 3600)
        let json = result.flatMap { try? JSONParser.parse(Array($0.stdout.utf8).filter { $0 != 0x0A }) }
        return json?["perSecond"]?.doubleValue ?? 0
    }

    struct DrainResult {
        var rate = 0.0
        var seconds = 0.0
        var rssGrowthMB = 0.0
    }

    /// Times the MQTT sink (the queue sink runner with the broker session) from start (connect included, as for
    /// the baseline) until every scan is acknowledged.
    static func drain(_ spool: Spool, count: Int, settings: MQTTSettings) -> DrainResult {
        guard let sink = QueuedSink(.mqtt, settings: settings, spool: spool, logger: Logger(minimum: .error)) else {
            print("mqtt sink: cannot be made")
            return DrainResult()
        }
        let start = MonotonicClock.now()
        sink.start()
        var rssAfterWarmup: Double?
        var rssMax = 0.0
        while true {
            // Progress is polled every 20 ms: this is the benchmark's own clock, not the product's.
            usleep(20_000)
            let acknowledged = sink.currentStats.delivered
            let rss = DrainBenchmark.residentMB()
            if rssAfterWarmup == nil, acknowledged >= count / 10 { rssAfterWarmup = rss }
            if rssAfterWarmup != nil { rssMax = max(rssMax, rss) }
            if acknowledged >= count || MonotonicClock.now() - start > 3600 { break }
        }
        let seconds = MonotonicClock.now() - start
        sink.stop()
        return DrainResult(
            rate: Double(count) / seconds, seconds: seconds, rssGrowthMB: max(0, rssMax - (rssAfterWarmup ?? rssMax)))
    }
}
