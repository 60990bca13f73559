import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import HID
import HIDPOS
import Logging
import Platform
import ReadPipeline
import Serial
import Spool

/// `plings-bench transports`: the scanner transports beside the keyboard (issue 24). A HID POS report and a serial
/// line to the committed spool record (goal < 2 ms median, like the keyboard path, which is measured in the same
/// run as the baseline), HID POS decoding from memory, and the CPU both transports use while they watch udev with
/// no scanner attached (goal: none, they sleep in `poll()`).
enum ScannerTransportBenchmark {
    static func run(arguments: [String]) {
        var samples = 300
        var idle = 10.0
        var directory = NSTemporaryDirectory()
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--samples": samples = Int(arguments[i + 1]) ?? samples
            case "--idle": idle = Double(arguments[i + 1]) ?? idle
            case "--dir": directory = arguments[i + 1]
            default: break
            }
            i += 2
        }
        guard case .success(let descriptor) = HIDReportDescriptor.parse(HIDPOSScanner.descriptor),
            case .success(let layout) = HIDPOSLayout.find(in: descriptor),
            let us = try? XKBLayouts.layout("us")
        else {
            print("error: the test scanner's descriptor or the us layout is unusable")
            exit(1)
        }
        let decode = decodeFromMemory(layout: layout)
        let hidpos = timeToCommit(samples: samples, path: "\(directory)/bench-hidpos-\(getpid()).sqlite") {
            pipeline, done in
            hidposHarness(layout: layout, pipeline: pipeline, done: done)
        }
        let serial = timeToCommit(samples: samples, path: "\(directory)/bench-serial-\(getpid()).sqlite") {
            pipeline, done in
            serialHarness(pipeline: pipeline, done: done)
        }
        let keyboard = HIDBenchmark.enterToCommit(
            samples: samples, layout: us, path: "\(directory)/bench-kbd-\(getpid()).sqlite")
        let cpu = idleCPU(seconds: idle)
        BenchTable.print([
            BenchRow(
                metric: "HID POS report -> spool record committed, median of \(samples) (keyboard Enter as baseline)",
                ours: hidpos.median * 1000, baseline: keyboard.median * 1000, unit: "ms", goal: "< 2 ms",
                higherIsBetter: false),
            BenchRow(
                metric: "HID POS report -> committed, p99", ours: hidpos.p99 * 1000, baseline: keyboard.p99 * 1000,
                unit: "ms", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "serial CR -> spool record committed (pty, raw mode), median of \(samples)",
                ours: serial.median * 1000, baseline: keyboard.median * 1000, unit: "ms", goal: "< 2 ms",
                higherIsBetter: false),
            BenchRow(
                metric: "serial CR -> committed, p99", ours: serial.p99 * 1000, baseline: keyboard.p99 * 1000,
                unit: "ms", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "HID POS decoding from memory (64-byte reports, 1-3 per code)", ours: decode / 1e6,
                baseline: nil, unit: "M reports/s", goal: "info"),
            BenchRow(
                metric: "CPU while HID POS and serial watch udev, no scanner (\(Int(idle)) s)", ours: cpu * 100,
                baseline: nil, unit: "% of a core", goal: "< 0.1 %", higherIsBetter: false),
        ])
    }

    /// Reports per second through `HIDPOSAssembler` (best of 5).
    static func decodeFromMemory(layout: HIDPOSLayout) -> Double {
        var reports: [[UInt8]] = []
        for n in 0..<3000 {
            let text = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVW\(n % 10)&p=4.2.3.3.\(n)"
            reports += HIDPOSScanner.reports(Array((text + String(repeating: "x", count: n % 3 * 50)).utf8))
        }
        var best = 0.0
        for _ in 0..<5 {
            var assembler = HIDPOSAssembler(layout: layout)
            var codes = 0
            let start = MonotonicClock.now()
            for report in reports {
                for output in assembler.feed(report, now: 0) {
                    if case .code = output { codes += 1 }
                }
            }
            let elapsed = MonotonicClock.now() - start
            precondition(codes == 3000, "decoded \(codes) codes")
            best = max(best, Double(reports.count) / elapsed)
        }
        return best
    }

    /// What a harness gives the timing loop: send everything of sample `n` but its last byte(s), then the last,
    /// and stop.
    struct Harness {
        var prepare: (Int) -> Void
        var finish: (Int) -> Void
        var stop: () -> Void
    }

    /// Medians of `finish` -> committed over `samples` codes, each a Plings URL of its own.
    static func timeToCommit(
        samples: Int, path: String, harness: (Pipeline, @escaping @Sendable (Bool) -> Void) -> Harness?
    ) -> (median: Double, p99: Double) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        guard let spool = try? Spool(path: path) else { return (0, 0) }
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: NoFixProvider(),
            debounce: [:], logger: Logger(minimum: .error))
        pipeline.start()
        defer { pipeline.stop() }
        let committed = Monitor<Double?>(nil)
        let done: @Sendable (Bool) -> Void = { accepted in
            if accepted { committed.update { $0 = MonotonicClock.now() } }
        }
        guard let harness = harness(pipeline, done) else { return (0, 0) }
        defer { harness.stop() }
        var latencies: [Double] = []
        for n in 0..<samples {
            harness.prepare(n)
            usleep(2_000)  // the reader has taken what came before: what is timed is the end of the code
            committed.update { $0 = nil }
            let start = MonotonicClock.now()
            harness.finish(n)
            var end: Double?
            _ = committed.wait(until: MonotonicClock.deadline(after: 5)) { state in
                end = state
                return state != nil
            }
            guard let end else { continue }
            latencies.append(end - start)
        }
        let sorted = latencies.sorted()
        guard !sorted.isEmpty else { return (0, 0) }
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }

    static func url(_ n: Int) -> String { "https://s.plings.io/?t=q&i=Lat\(n)x&p=4.2.\(n)" }

    /// A HID POS source reading a pipe: each code one 64-byte Scanned Data Report (a pipe read of 64 bytes gets
    /// exactly one); `prepare` sends nothing, so the whole report is timed.
    static func hidposHarness(
        layout: HIDPOSLayout, pipeline: Pipeline, done: @escaping @Sendable (Bool) -> Void
    ) -> Harness? {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        let source = HIDPOSSource(
            config: HIDPOSConfig(), hosts: ["s.plings.io"], logger: Logger(minimum: .error), udev: false
        ) { read, then in
            pipeline.submit(read) { outcome in
                if case .accepted = outcome { done(true) }
                then(.committed(pending: true))
            }
        }
        source.start()
        source.attach(fd: fds[0], name: "bench", layout: layout)
        let writer = fds[1]
        return Harness(
            prepare: { _ in },
            finish: { n in HIDBenchmark.write(writer, HIDPOSScanner.reports(Array(url(n).utf8))[0]) },
            stop: {
                close(writer)
                source.stop(deadline: MonotonicClock.deadline(after: 2))
            })
    }

    /// A serial source reading a pty in raw mode: `prepare` sends the URL, `finish` its CR.
    static func serialHarness(pipeline: Pipeline, done: @escaping @Sendable (Bool) -> Void) -> Harness? {
        guard let (master, path) = PseudoTerminal.open() else { return nil }
        let source = SerialSource(config: SerialConfig(), logger: Logger(minimum: .error), udev: false) { read in
            pipeline.submit(read) { outcome in
                if case .accepted = outcome { done(true) }
            }
        }
        source.start()
        source.attach(path: path, name: "bench")
        usleep(100_000)  // the port is open
        return Harness(
            prepare: { n in HIDBenchmark.write(master, Array(url(n).utf8)) },
            finish: { _ in HIDBenchmark.write(master, [0x0D]) },
            stop: {
                source.stop(deadline: MonotonicClock.deadline(after: 2))
                close(master)
            })
    }

    /// The process's CPU time per wall-clock second while a HID POS source and a serial source (one match rule)
    /// watch udev with nothing to read.
    static func idleCPU(seconds: Double) -> Double {
        var serialConfig = SerialConfig()
        serialConfig.match = [SerialConfig.Match(vendor: "ffff")]
        let hidpos = HIDPOSSource(config: HIDPOSConfig(), hosts: [], logger: Logger(minimum: .error)) { _, _ in }
        let serial = SerialSource(config: serialConfig, logger: Logger(minimum: .error)) { _ in }
        hidpos.start()
        serial.start()
        usleep(200_000)
        let before = cpuSeconds()
        let start = MonotonicClock.now()
        usleep(UInt32(seconds * 1_000_000))
        let used = cpuSeconds() - before
        let wall = MonotonicClock.now() - start
        hidpos.stop(deadline: MonotonicClock.deadline(after: 2))
        serial.stop(deadline: MonotonicClock.deadline(after: 2))
        return used / wall
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
