import Bridge
import BridgeCore
import BridgeTestSupport
import CXKBCommon
import Foundation
import Glibc
import HID
import Logging
import Spool
import Platform
import ReadPipeline

/// `plings-bench hid`: keystroke decoding throughput from memory, the reader loop through a pipe, and the
/// latency from a scanner's KEY_ENTER to the committed spool record (docs/benchmarks.md: goals >= 30 M events/s and
/// < 2 ms median). Run it from a release build.
enum HIDBenchmark {
    static func run(arguments: [String]) {
        var lines = 2000
        var samples = 300
        var directory = NSTemporaryDirectory()
        var i = 0
        while i + 1 < arguments.count {
            switch arguments[i] {
            case "--lines": lines = Int(arguments[i + 1]) ?? lines
            case "--samples": samples = Int(arguments[i + 1]) ?? samples
            case "--dir": directory = arguments[i + 1]
            default: break
            }
            i += 2
        }
        guard let se = try? XKBLayouts.layout("se"), let us = try? XKBLayouts.layout("us") else {
            print("error: cannot compile the se and us layouts from xkb-data")
            exit(1)
        }
        let (events, bytes) = stream(lines: lines, layout: se)
        let memory = (0..<5).map { _ in decodeFromMemory(bytes, layout: se, expectedLines: lines) }
        let perEvent = (0..<3).map { _ in xkbPerEventDecode(bytes, layout: "se", expectedLines: lines) }
        let pipe = pipeThroughput(bytes, events: events.count, lines: lines)
        let latency = enterToCommit(samples: samples, layout: us, path: "\(directory)/bench-hid-\(getpid()).sqlite")
        BenchTable.print([
            BenchRow(
                metric: "decoder, parse + decode from memory (best of 5, \(events.count) events)",
                ours: (memory.max() ?? 0) / 1e6, baseline: (perEvent.max() ?? 0) / 1e6, unit: "M events/s",
                goal: ">= 30 M events/s"),
            BenchRow(
                metric: "reader loop through a pipe (poll, read, decode, submit)",
                ours: pipe / 1e6, baseline: nil, unit: "M events/s", goal: "info"),
            BenchRow(
                metric: "KEY_ENTER written -> spool record committed, median of \(samples) (synchronous=FULL)",
                ours: latency.median * 1000, baseline: nil, unit: "ms", goal: "< 2 ms", higherIsBetter: false),
            BenchRow(
                metric: "KEY_ENTER written -> Read handed to the pipeline (poll wake-up + decode), median",
                ours: latency.toSubmit * 1000, baseline: nil, unit: "ms", goal: "info", higherIsBetter: false),
            BenchRow(
                metric: "KEY_ENTER written -> spool record committed, p99",
                ours: latency.p99 * 1000, baseline: nil, unit: "ms", goal: "info", higherIsBetter: false),
        ])
    }

    /// `lines` Plings URLs typed on the Swedish layout (Shift and AltGr keys included), as raw records.
    static func stream(lines: Int, layout: KeyboardLayout) -> ([InputEvent], [UInt8]) {
        var events: [InputEvent] = []
        for n in 0..<lines {
            let text = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVW\(n % 10)&p=4.2.3.3.\(n)"
            events += EventScript.typing(text, layout: layout) ?? []
        }
        return (events, InputEvent.encode(events))
    }

    /// The baseline: the same stream decoded by asking libxkbcommon per event (`xkb_state_update_key` for every
    /// key event, `xkb_state_key_get_utf8` for every press), as a decoder without a precomputed table would.
    static func xkbPerEventDecode(_ bytes: [UInt8], layout: String, expectedLines: Int) -> Double {
        guard let context = xkb_context_new(XKB_CONTEXT_NO_ENVIRONMENT_NAMES) else { return 0 }
        defer { xkb_context_unref(context) }
        // The names must outlive the call: each C string lives for its closure (a String passed as a pointer
        // field would dangle).
        let compiled = "evdev".withCString { rules in
            "pc105".withCString { model in
                layout.withCString { layoutName in
                    "".withCString { variant in
                        var names = xkb_rule_names(
                            rules: rules, model: model, layout: layoutName, variant: variant, options: nil)
                        return xkb_keymap_new_from_names(context, &names, XKB_KEYMAP_COMPILE_NO_FLAGS)
                    }
                }
            }
        }
        guard let keymap = compiled,
            let state = xkb_state_new(keymap)
        else { return 0 }
        defer {
            xkb_state_unref(state)
            xkb_keymap_unref(keymap)
        }
        var parser = InputEventParser()
        var line: [UInt8] = []
        var buffer = [CChar](repeating: 0, count: 16)
        var count = 0
        var produced = 0
        let start = MonotonicClock.now()
        bytes.withUnsafeBytes { raw in
            parser.parse(raw) { event in
                count &+= 1
                guard event.type == Evdev.EV_KEY, event.value != 2 else { return }
                let keycode = UInt32(event.code) + 8
                if event.value == 1 {
                    if event.code == Evdev.KEY_ENTER {
                        if !line.isEmpty { produced &+= 1 }
                        line.removeAll(keepingCapacity: true)
                    } else {
                        let n = xkb_state_key_get_utf8(state, keycode, &buffer, buffer.count)
                        for index in 0..<Int(max(0, min(n, 15))) { line.append(UInt8(bitPattern: buffer[index])) }
                    }
                }
                xkb_state_update_key(state, keycode, event.value == 1 ? XKB_KEY_DOWN : XKB_KEY_UP)
            }
        }
        let elapsed = MonotonicClock.now() - start
        if produced != expectedLines { print("warning: xkb per-event decoded \(produced) of \(expectedLines) lines") }
        return Double(count) / elapsed
    }

    /// Events per second through `InputEventParser` + `KeystrokeDecoder`, from one in-memory buffer.
    static func decodeFromMemory(_ bytes: [UInt8], layout: KeyboardLayout, expectedLines: Int) -> Double {
        var parser = InputEventParser()
        var decoder = KeystrokeDecoder(layout: layout)
        var count = 0
        var produced = 0
        let start = MonotonicClock.now()
        bytes.withUnsafeBytes { raw in
            parser.parse(raw) { event in
                count &+= 1
                decoder.feed(event, now: event.time) { output in
                    if case .line = output { produced &+= 1 }
                }
            }
        }
        let elapsed = MonotonicClock.now() - start
        if produced != expectedLines { print("warning: decoded \(produced) of \(expectedLines) lines") }
        return Double(count) / elapsed
    }

    /// Events per second from the first write until the last line reached `submit`, through HIDSource.
    static func pipeThroughput(_ bytes: [UInt8], events: Int, lines: Int) -> Double {
        var config = BridgeConfig().hid
        config.layout = "se"
        config.interKeyTimeout = 60
        let count = Mutex(0)
        let done = DispatchSemaphore(value: 0)
        let source = HIDSource(config: config, logger: Logger(minimum: .error), udev: false) { _ in
            if count.withLock({ n -> Bool in
                n += 1
                return n == lines
            }) {
                done.signal()
            }
        }
        source.start()
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return 0 }
        source.attach(fd: fds[0], name: "bench")
        let start = MonotonicClock.now()
        write(fds[1], bytes)
        let finished = done.wait(timeout: .now() + 30) == .success
        let elapsed = MonotonicClock.now() - start
        close(fds[1])
        source.stop()
        return finished ? Double(events) / elapsed : 0
    }

    /// Time from writing the KEY_ENTER press of a scan (everything before it already consumed) to the
    /// pipeline's completion callback for its committed spool record.
    static func enterToCommit(
        samples: Int, layout: KeyboardLayout, path: String
    ) -> (median: Double, p99: Double, toSubmit: Double) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        guard let spool = try? Spool(path: path) else { return (0, 0, 0) }
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: NoFixProvider(),
            debounce: [:], logger: Logger(minimum: .error))
        pipeline.start()
        let committedAt = Mutex<Double?>(nil)
        let submittedAt = Mutex<Double?>(nil)
        let committed = DispatchSemaphore(value: 0)
        let source = HIDSource(config: BridgeConfig().hid, logger: Logger(minimum: .error), udev: false) { read in
            submittedAt.withLock { $0 = MonotonicClock.now() }
            pipeline.submit(read) { outcome in
                if case .accepted = outcome {
                    committedAt.withLock { $0 = MonotonicClock.now() }
                }
                committed.signal()
            }
        }
        source.start()
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return (0, 0, 0) }
        source.attach(fd: fds[0], name: "bench")
        var latencies: [Double] = []
        var decodeLatencies: [Double] = []
        for n in 0..<samples {
            let events = EventScript.typing("https://s.plings.io/?t=q&i=Lat\(n)x&p=4.2.\(n)", layout: layout) ?? []
            // The last two reports are the Enter press and its release.
            guard
                let press = events.lastIndex(where: {
                    $0.type == Evdev.EV_KEY && $0.code == Evdev.KEY_ENTER && $0.value == 1
                })
            else { continue }
            let pressEnd = events[press...].firstIndex { $0.type == Evdev.EV_SYN } ?? press
            let reportStart = events[..<press].lastIndex { $0.type == Evdev.EV_SYN }.map { $0 + 1 } ?? press
            write(fds[1], InputEvent.encode(events[..<reportStart]))
            // Let the reader consume the line so far: what is timed is the Enter report alone.
            usleep(2_000)
            let start = MonotonicClock.now()
            write(fds[1], InputEvent.encode(events[reportStart...pressEnd]))
            guard committed.wait(timeout: .now() + 5) == .success, let end = committedAt.withLock({ $0 }) else {
                continue
            }
            committedAt.withLock { $0 = nil }
            latencies.append(end - start)
            if let submitted = submittedAt.withLock({ $0 }) { decodeLatencies.append(submitted - start) }
            write(fds[1], InputEvent.encode(events[(pressEnd + 1)...]))
        }
        close(fds[1])
        source.stop()
        pipeline.stop()
        let sorted = latencies.sorted()
        let toSubmit = decodeLatencies.sorted()
        guard !sorted.isEmpty, !toSubmit.isEmpty else { return (0, 0, 0) }
        return (
            sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)],
            toSubmit[toSubmit.count / 2]
        )
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}
