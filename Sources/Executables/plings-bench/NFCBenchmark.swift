import Bridge
import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import NFC
import Spool
import Platform
import ReadPipeline

/// `plings-bench nfc`: tap-to-committed latency of `NFCSource -> Pipeline -> Spool` on the NFC rig, against
/// `pyscard_baseline.py` doing the same APDUs and printing the URL; the bridge's own work; APDUs per read
/// against the minimum; and the CPU time of an idle source with readers attached. Then the same taps through a
/// reader that answers after a fixed delay per exchange (`--delay`, default 12 ms, as USB readers take 7-24 ms):
/// an ACR122U-like reader read with FAST_READ against the pyscard baseline's READ BINARY sequence on the same
/// delayed reader, and a plain reader (the READ BINARY fallback).
///
/// Needs the rig's packages (pcscd, vpcd, python3-virtualsmartcard, python3-pyscard) and no other pcscd:
/// run it as `flock /tmp/pcscd.lock swift run -c release plings-bench nfc` from the package root.
enum NFCBenchmark {
    static let url = "https://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"
    static let uid = "04A1B2C3D4E5F6"

    static func run(arguments: [String]) {
        var taps = 30
        var idle = 60.0
        var delay = 12.0
        var rigDirectory = FileManager.default.currentDirectoryPath + "/Tests/Rigs/nfc"
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--taps": taps = max(1, Int(arguments[i + 1]) ?? taps)
            case "--idle": idle = max(0, Double(arguments[i + 1]) ?? idle)
            case "--rig-dir": rigDirectory = arguments[i + 1]
            case "--delay": delay = max(0, min(1000, Double(arguments[i + 1]) ?? delay))
            default: break
            }
            i += 2
        }
        guard FileManager.default.fileExists(atPath: rigDirectory + "/nfc_rig.py") else {
            print("nfc: \(rigDirectory)/nfc_rig.py not found (run from the package root or pass --rig-dir)")
            exit(2)
        }

        let ours: Measurement
        let newSpool: Measurement
        let fast: Measurement
        let fallback: Measurement
        let classic: Measurement
        let type5: Measurement
        let proprietary: Measurement
        do {
            newSpool = try measureBridge(taps: taps, idle: 0, rigDirectory: rigDirectory, warmSpool: false)
            ours = try measureBridge(taps: taps, idle: idle, rigDirectory: rigDirectory, warmSpool: true)
            // The same taps through a reader that answers after `delay` ms per exchange, as a USB reader does:
            // an ACR122U-like reader (fast read, feedback after the commit), then a plain one (READ BINARY).
            fast = try measureBridge(
                taps: taps, idle: 0, rigDirectory: rigDirectory, warmSpool: true,
                reader: ("acr122u", .acr122u, delay))
            fallback = try measureBridge(
                taps: taps, idle: 0, rigDirectory: rigDirectory, warmSpool: true, reader: ("plain", .plain, delay))
            // An NDEF-formatted MIFARE Classic 1K (issue 28) on the same ACR122U-like reader.
            classic = try measureBridge(
                taps: taps, idle: 0, rigDirectory: rigDirectory, warmSpool: true,
                reader: ("acr122u", .acr122u, delay), card: "mifare1k")
            // An NFC Forum Type 5 ICODE SLIX (issue 28) on a reader with ISO 15693 (the Omnikey profile).
            type5 = try measureBridge(
                taps: taps, idle: 0, rigDirectory: rigDirectory, warmSpool: true,
                reader: ("plain", .omnikey, delay), card: "icodeslix")
            // An ST25DV64K whose NDEF TLV follows a 1040-byte Proprietary TLV (issue 45): skipped by its length.
            proprietary = try measureBridge(
                taps: taps, idle: 0, rigDirectory: rigDirectory, warmSpool: true,
                reader: ("plain", .omnikey, delay), card: "st25dv64k", options: "proprietary=1040")
        } catch {
            print("nfc: bridge run failed: \(error)")
            exit(1)
        }
        let baseline = measureBaseline(taps: taps, rigDirectory: rigDirectory)
        let delayedBaseline = measureBaseline(taps: taps, rigDirectory: rigDirectory, delay: delay)
        // The same pause between commits as between taps (tap, ~0.5-1 s on the reader, remove).
        let rawCommit = SpoolBenchmark.rawCommitAfterPause(
            path: NSTemporaryDirectory() + "plings-bench-nfc-raw.sqlite", samples: 20, pause: 0.7)
        if baseline == nil { print("nfc: the pyscard baseline did not run (python3-pyscard installed?)") }

        let minimum = minimumAPDUs()
        var rows = [
            BenchRow(
                metric: "tap to committed spool record, card present -> durable commit (median of \(taps) taps)",
                ours: median(ours.latencies), baseline: baseline, unit: "ms",
                goal: "ratio <= 1.0 (baseline: pyscard, same APDUs, prints the URL)", higherIsBetter: false),
            BenchRow(
                metric: "same, p95", ours: percentile(ours.latencies, 0.95), baseline: nil, unit: "ms",
                goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "same on a brand-new spool (its WAL still growing: the first ~1000 pages after install)",
                ours: median(newSpool.latencies), baseline: baseline, unit: "ms", goal: "info",
                higherIsBetter: false),
            BenchRow(
                metric: "of which card present -> tag read and parsed (median)", ours: median(ours.toRead),
                baseline: baseline, unit: "ms", goal: "info: the read alone against the baseline",
                higherIsBetter: false),
            BenchRow(
                metric: "of which read -> committed durably through the pipeline (median)",
                ours: median(ours.toCommit), baseline: rawCommit, unit: "ms",
                goal: "info: baseline = raw SQLite, one durable commit after 0.7 s without I/O", higherIsBetter: false),
            BenchRow(
                metric: "bridge's own work, card present -> committed minus time in SCardConnect/Transmit (median)",
                ours: median(ours.ownWork), baseline: nil, unit: "ms", goal: "< 5 ms", higherIsBetter: false),
            BenchRow(
                metric: "APDUs per read, NTAG213 with a Plings URL (max over taps; minimum \(minimum))",
                ours: Double(ours.apdus.max() ?? 0), baseline: Double(minimum), unit: "APDUs",
                goal: "= minimum", higherIsBetter: false),
        ]
        let d = String(format: "%g", delay)
        rows += [
            BenchRow(
                metric:
                    "USB reader model (\(d) ms per exchange): tap to committed, ACR122U profile, fast read (median)",
                ours: median(fast.latencies), baseline: delayedBaseline, unit: "ms",
                goal: "ratio <= 0.30 (baseline: pyscard, READ BINARY sequence, same delayed reader, prints the URL)",
                higherIsBetter: false),
            BenchRow(
                metric: "same reader model: APDUs per NTAG213 read with fast read (max over taps)",
                ours: Double(fast.apdus.max() ?? 0), baseline: Double(minimum), unit: "APDUs",
                goal: "1 (one FAST_READ of pages 0-39: UID, CC, message); baseline: READ BINARY minimum",
                higherIsBetter: false),
            BenchRow(
                metric: "same reader model, plain reader (READ BINARY fallback): tap to committed (median)",
                ours: median(fallback.latencies), baseline: delayedBaseline, unit: "ms",
                goal: "info: ratio ~1 (same APDUs as the baseline)", higherIsBetter: false),
            BenchRow(
                metric: "same, plain reader: APDUs per NTAG213 read (max over taps)",
                ours: Double(fallback.apdus.max() ?? 0), baseline: Double(minimum), unit: "APDUs", goal: "= minimum",
                higherIsBetter: false),
            BenchRow(
                metric: "same reader model, ACR122U: MIFARE Classic 1K with a Plings URL (MAD, public keys): tap to "
                    + "committed (median)",
                ours: median(classic.latencies), baseline: delayedBaseline, unit: "ms",
                goal: "info (baseline: the NTAG213 READ BINARY sequence)", higherIsBetter: false),
            BenchRow(
                metric:
                    "same, MIFARE Classic 1K: APDUs per read (GET UID, 2 LOAD KEYS, 3 AUTHENTICATE, 7 block reads: "
                    + "sector 0's trailer for the General Purpose Byte, the MAD, 4 of NDEF)",
                ours: Double(classic.apdus.max() ?? 0), baseline: 13, unit: "APDUs", goal: "= minimum",
                higherIsBetter: false),
            BenchRow(
                metric: "same reader model, Omnikey profile: ICODE SLIX (Type 5) with a Plings URL: tap to committed "
                    + "(median)",
                ours: median(type5.latencies), baseline: delayedBaseline, unit: "ms",
                goal: "info (baseline: the NTAG213 READ BINARY sequence)", higherIsBetter: false),
            BenchRow(
                metric: "same, ICODE SLIX: APDUs per read (GET UID, block 0 with the CC, blocks 1-16 in one read)",
                ours: Double(type5.apdus.max() ?? 0), baseline: 3, unit: "APDUs", goal: "= minimum",
                higherIsBetter: false),
            BenchRow(
                metric: "same, ST25DV64K, a 1040-byte Proprietary TLV before the message: APDUs per read (GET UID, "
                    + "block 0, block 1, the TLV's header, the message from its block; reading through took 14)",
                ours: Double(proprietary.apdus.max() ?? 0), baseline: 5, unit: "APDUs", goal: "= minimum",
                higherIsBetter: false),
        ]
        if fast.feedbackSent < fast.latencies.count {
            print(
                "nfc: \(fast.latencies.count - fast.feedbackSent) of \(fast.latencies.count) feedback commands not sent"
            )
        }
        if let cpu = ours.idleCPU {
            rows.append(
                BenchRow(
                    metric: "CPU time of the NFC source over \(Int(idle)) s idle, 2 readers attached",
                    ours: cpu * 1000, baseline: nil, unit: "ms", goal: "< 10 ms", higherIsBetter: false))
        }
        BenchTable.print(rows)
        for (name, run) in [
            ("plain", ours), ("fast", fast), ("fallback", fallback), ("classic", classic), ("type5", type5),
            ("proprietary", proprietary),
        ]
        where run.failures > 0 {
            print("nfc: \(run.failures) tap(s) failed in the \(name) run")
        }
    }

    struct Measurement {
        var latencies: [Double] = []
        var ownWork: [Double] = []
        var toRead: [Double] = []
        var toCommit: [Double] = []
        var apdus: [Int] = []
        var failures = 0
        var idleCPU: Double?
        var feedbackSent = 0
    }

    struct BenchFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// One `tap ... / remove` cycle per sample; each sample waits for the durable commit of its read.
    /// `warmSpool`: measure on a spool in its steady state (see `warm(spoolAt:)`), else on a new one.
    /// `reader`: the rig personality of reader 0, the profile `nfc.profiles` gives it, and the per-exchange delay
    /// in ms; nil: the rig's default (plain, no delay) with no profile rule.
    static func measureBridge(
        taps: Int, idle: Double, rigDirectory: String, warmSpool: Bool,
        reader: (personality: String, profile: ReaderProfile, delay: Double)? = nil, card: String = "ntag213",
        options: String = ""
    ) throws -> Measurement {
        let directory = NSTemporaryDirectory() + "plings-bench-nfc-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        if warmSpool { try warm(spoolAt: directory + "/spool.sqlite") }
        let spool = try Spool(path: directory + "/spool.sqlite")
        let logger = Logger(minimum: .warn)
        // Debounce 0: the benchmark taps the same tag again and again on purpose.
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: NoFixProvider(),
            debounce: [:], logger: logger)
        pipeline.start()
        defer { pipeline.stop() }
        let commits = Collector<Double>()  // monotonic times of the durable commits
        let events = Collector<NFCTapEvent>()
        var config = BridgeConfig().nfc
        if let reader { config.profiles = [.init(reader: "Virtual PCD 00 00", profile: reader.profile)] }
        let source = NFCSource(
            config: config, hosts: ["s.plings.io"], logger: logger, submit: { _ in },
            onTap: { events.append($0) },
            commit: { read, done in
                pipeline.commit(read) { result in
                    if case .committed = result { commits.append(MonotonicClock.now()) }
                    done(result)
                }
            })

        // The caller holds /tmp/pcscd.lock (`flock /tmp/pcscd.lock plings-bench ...`), so the rig must not wait for it.
        let rig = try NFCRig(script: rigDirectory + "/nfc_rig.py", takeLock: false)
        defer { rig.close() }
        if let reader { try rig.setReader(0, reader.personality, delayMilliseconds: reader.delay) }
        source.start()
        defer { source.stop() }

        var result = Measurement()
        var successes = 0
        for n in 1...taps {
            // MIFARE Classic takes a 4-byte UID, an ISO 15693 tag an 8-byte one starting E0 (ISO/IEC 15693-3).
            let iso15693 = card == "icodeslix" || card == "st25dv64k"
            let tagUID = card.hasPrefix("mifare") ? String(uid.prefix(8)) : iso15693 ? "E0" + uid : uid
            _ = try rig.send("tap 0 \(card) \(tagUID) - url=\(url) \(options)")
            guard events.wait(count: n, timeout: 10) else {
                throw BenchFailure(description: "tap \(n): no read within 10 s")
            }
            let event = events.all[n - 1]
            if event.succeeded {
                guard commits.wait(count: successes + 1, timeout: 10) else {
                    throw BenchFailure(description: "tap \(n): read not committed within 10 s")
                }
                let committed = commits.all[successes]
                successes += 1
                let latency = (committed - event.detectedMonotonic) * 1000
                result.latencies.append(latency)
                result.ownWork.append(latency - (event.connectSeconds + event.transmitSeconds) * 1000)
                result.apdus.append(event.apduCount)
                result.toRead.append(event.detectToReadSeconds * 1000)
                result.toCommit.append((committed - event.finishedMonotonic) * 1000)
            } else {
                result.failures += 1
            }
            if reader?.profile.feedback != nil {
                // Let the feedback reach the reader before the tag goes (the person is still holding it).
                _ = eventually(timeout: 2) { source.feedbackCounters.sent + source.feedbackCounters.refused >= n }
            }
            _ = try rig.send("remove 0")
        }
        result.feedbackSent = source.feedbackCounters.sent

        if idle > 0 {
            let before = cpuSeconds()
            Thread.sleep(forTimeInterval: idle)
            result.idleCPU = cpuSeconds() - before
        }
        return result
    }

    /// Brings a new spool to the state a gate box's spool is in after its first reads and a restart: 1,500
    /// single-scan commits (several WAL checkpoints), then closed, so the WAL is allocated at its working
    /// size and the measured commits rewrite it in place, as every later commit of a running bridge does.
    static func warm(spoolAt path: String) throws {
        let spool = try Spool(path: path)
        let builder = ScanBuilder(parser: PlingsURLParser())
        for _ in 0..<1500 {
            try spool.insert([
                builder.build(Read(sourceKind: .manual, device: "warm-up", raw: url, time: Date()), fix: nil)
            ])
        }
    }

    /// `pyscard_baseline.py --rig`: the median of its `ms` (card reported present -> URL printed).
    static func measureBaseline(taps: Int, rigDirectory: String, delay: Double = 0) -> Double? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            "-c", NFCRig.launcher(takeLock: false), "/usr/bin/python3", rigDirectory + "/pyscard_baseline.py",
            "--rig", "--count", String(taps), "--url", url, "--uid", uid, "--delay", String(delay),
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var times: [Double] = []
        for line in output.split(separator: "\n") where line.hasPrefix("{") {
            guard let json = try? JSONParser.parse(String(line)), json["ok"] == .bool(true),
                let ms = json["ms"]?.doubleValue
            else { continue }
            times.append(ms)
        }
        return times.isEmpty ? nil : median(times)
    }

    /// UID, the CC read (CC and 12 data bytes), then 16 bytes per read until the TLV and message are in.
    static func minimumAPDUs() -> Int {
        let end = 2 + 4 + NDEFURI.encodePayload(url).count  // TLV header, record header and type, payload
        return 2 + max(0, end - 12 + 15) / 16
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    static func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
    }
}
