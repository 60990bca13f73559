import Bridge
import BridgeCore
import Foundation
import HID
import Logging
import Spool
import Platform
import SinkKit
import SourceKit
import QRCode
import ReadPipeline

extension CLI {
    /// `plings-bridge scanners [--json]`: the devices each read source could read (keyboards, HID POS nodes,
    /// serial ports), which it takes and why, and whether they can be opened (and grabbed). `--watch` reads the scanners (as `run` would) and prints each line;
    /// with `--pipeline` each line also goes through the real pipeline into the spool (debounce included).
    func scanners(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("scanners takes no arguments") }
        let settings = try settings(args)
        if args.has("--watch") {
            return try watchScanners(args, settings)
        }
        if args.has("--calibrate") {
            return try calibrate(args, settings)
        }
        if let file = args.value("--calibration-sheet") {
            return try calibrationSheet(file)
        }
        if args.has("--test") {
            return try scannerTest(args, settings)
        }
        // Every registered source's devices, in the registry's order: keyboards, HID POS nodes, serial ports.
        let listings = SourceRegistry.modules.flatMap { $0.listDevices?(settings.config) ?? [] }
        if args.json {
            print(JSONValue.array(listings.map(\.json)).encoded())
            return 0
        }
        if listings.isEmpty {
            print("(no keyboards, scanners, hidraw devices or USB serial ports found)")
            return 0
        }
        for listing in listings { listing.lines.forEach(show) }
        return 0
    }

    /// `scanners --watch`: runs every scanner source the configuration enables (the registry's sources that list
    /// devices: keyboard-wedge, HID POS, serial), as `run` makes them, until `--count` lines were read or
    /// `--duration` seconds passed (default: until killed), printing one JSON object per line as it is read (or,
    /// with `--pipeline`, committed). Without `--pipeline` nothing is committed, so no good-read feedback is given.
    private func watchScanners(_ args: Arguments, _ settings: Settings) throws -> Int32 {
        let count = try args.positiveNumber("--count")
        let duration = try args.value("--duration").map { try DurationText.wait($0, flag: "--duration") }
        let config = settings.config
        let scannerModules = SourceRegistry.modules.filter { $0.listDevices != nil }
        let modules = scannerModules.filter { $0.isEnabled(config) }
        for module in scannerModules where !module.isEnabled(config) {
            logger.info(
                "not watched: off in the configuration", [("source", module.kind.rawValue), ("key", module.enabledKey)])
        }
        guard !modules.isEmpty else {
            throw CommandFailure.config(
                "every scanner source is off (\(scannerModules.map(\.enabledKey).joined(separator: ", ")))")
        }
        let printed = Mutex(0)
        let done = Monitor(false)
        let emit: @Sendable (JSONValue) -> Void = { value in
            let reached = printed.withLock { n -> Bool in
                // One write(2) per line, under the lock: lines never interleave and are never buffered.
                FileHandle.standardOutput.write(Data((value.encoded() + "\n").utf8))
                n += 1
                return count.map { n >= $0 } ?? false
            }
            if reached { done.update { $0 = true } }
        }
        let pipeline: Pipeline?
        if args.has("--pipeline") {
            let spool = try openSpool(settings, create: true)
            SinkRegistry.registerQueues(in: spool, config: config, logger: logger)
            pipeline = Pipeline(
                spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: config.hosts)),
                fixProvider: NoFixProvider(),
                debounce: Dictionary(uniqueKeysWithValues: modules.map { ($0.kind, $0.debounce(config)) }),
                logger: logger)
            pipeline?.start()
        } else {
            pipeline = nil
        }
        let context = SourceContext(
            config: config, logger: logger,
            commit: { read, then in
                guard let pipeline else { return emit(WatchedRead.json(read, outcome: nil)) }
                pipeline.submit(read) { outcome in
                    emit(WatchedRead.json(read, outcome: outcome))
                    switch outcome {
                    case .accepted(let scan): then(.committed(pending: scan.state == .pending))
                    case .debounced: then(.duplicate)
                    case .refused: then(.refused)
                    }
                }
            })
        let sources = modules.map { $0.make(context) }
        for source in sources {
            source.start()
            logger.info("watching scanners", [("source", source.name), ("summary", source.state.summary)])
        }
        if let duration {
            done.wait(until: MonotonicClock.deadline(after: duration)) { $0 }
        } else {
            done.wait { $0 }
        }
        let deadline = MonotonicClock.deadline(after: 3)
        for source in sources { source.stop(deadline: deadline) }
        pipeline?.stop()
        return 0
    }

    /// `scanners --calibrate`: waits (up to `--timeout`, 60 s) for a keyboard-wedge scanner to read the calibration
    /// code, then names the xkb layout whose keys explain exactly what it typed (`LayoutCalibration`). Exit 0 when
    /// one does, 1 when none does or nothing was scanned.
    private func calibrate(_ args: Arguments, _ settings: Settings) throws -> Int32 {
        let timeout = try args.value("--timeout").map { try DurationText.wait($0, flag: "--timeout") } ?? 60
        let scanners = try keyboardScanners(args, settings).map { (node: $0.node, name: $0.name) }
        // Compiling xkb-data's ~1000 layouts takes a while: done while the person fetches the sheet.
        var names = ScannerCalibration.catalogNames()
        if let list = args.value("--layouts") {
            let (chosen, unknown) = ScannerCalibration.catalogNames(among: list.split(separator: ",").map(String.init))
            guard unknown.isEmpty, !chosen.isEmpty else {
                throw CommandFailure.usage(
                    "--layouts: xkb-data has no layout \(unknown.map { "'\(TerminalText.escape($0))'" }.joined(separator: ", "))"
                )
            }
            names = chosen
        }
        let candidates = names
        let warm = OwnThread(name: "xkb-compile") { for name in candidates { _ = try? XKBLayouts.layout(name) } }
        logger.info(
            "scan the calibration code now (plings-bridge scanners --calibration-sheet prints it)",
            [("scanners", scanners.map(\.name).joined(separator: ", ")), ("timeout", "\(Int(timeout)) s")])
        let capture: KeystrokeCapture.Line?
        do {
            capture = try KeystrokeCapture(scanners).nextLine(deadline: MonotonicClock.deadline(after: timeout))
        } catch {
            throw CommandFailure.runtime(error.description)
        }
        warm.join()
        guard let capture else {
            throw CommandFailure.runtime(
                "no scan within \(Int(timeout)) s: scan the calibration code (or use --timeout)")
        }
        let verdict = ScannerCalibration.detect(capture.events, among: names)
        if args.json {
            let closest = verdict.closest.map { reading in
                JSONValue.object([
                    ("layout", .string(reading.layout)),
                    ("unmatched", .array(reading.unmatched.map { .string(String($0)) })),
                    ("typed", reading.decoded.map(JSONValue.string) ?? .null),
                ])
            }
            print(
                JSONValue.object([
                    ("device", .string(capture.device)), ("layout", verdict.layout.map(JSONValue.string) ?? .null),
                    ("candidates", .array(verdict.candidates.map(JSONValue.string))), ("closest", closest ?? .null),
                    ("config", verdict.layout.map { .string(#""hid": {"layout": "\#($0)"}"#) } ?? .null),
                ]).encoded())
            return verdict.layout == nil ? 1 : 0
        }
        if let layout = verdict.layout {
            print("\(TerminalText.escape(capture.device)) types as the '\(layout)' keyboard layout")
            let others = verdict.candidates.dropFirst()
            if !others.isEmpty {
                print(
                    "  (these type the code with the same keys too: \(others.prefix(8).joined(separator: ", "))\(others.count > 8 ? ", ..." : ""))"
                )
            }
            print("  set it in the configuration: \"hid\": {\"layout\": \"\(layout)\"}")
            print("  (a scanner whose country differs from the others: a hid.match entry with its own \"layout\")")
            return 0
        }
        print("no keyboard layout explains what \(TerminalText.escape(capture.device)) typed")
        if let closest = verdict.closest {
            let wrong = closest.unmatched.map { TerminalText.escape(String($0)) }.joined(separator: " ")
            print("  closest: '\(closest.layout)', which does not produce: \(wrong)")
        }
        print("  set the scanner's keyboard country (its manual's country codes) to the keyboard layout in use,")
        print("  or to US English and hid.layout \"us\"")
        return 1
    }

    /// `scanners --calibration-sheet FILE.svg|FILE.png`: the printable sheet with the calibration code
    /// (`CalibrationSheet`), its QR Codes made by libqrencode.
    private func calibrationSheet(_ file: String) throws -> Int32 {
        let lower = file.lowercased()
        guard lower.hasSuffix(".svg") || lower.hasSuffix(".png") else {
            throw CommandFailure.usage("--calibration-sheet: the file must end in .svg (to print) or .png")
        }
        var codes: [CalibrationSheet.Code] = []
        for (title, text) in CalibrationSheet.contents {
            let matrix: QRCodeMatrix
            do {
                matrix = try QRCodeMatrix.encode(Array(text.utf8))
            } catch {
                throw CommandFailure.runtime("cannot make the QR Code '\(title)': \(error.description)")
            }
            codes.append(CalibrationSheet.Code(title: title, text: text, width: matrix.width, modules: matrix.modules))
        }
        let bytes = lower.hasSuffix(".svg") ? Array(CalibrationSheet.svg(codes).utf8) : CalibrationSheet.png(codes)
        guard FileManager.default.createFile(atPath: file, contents: Data(bytes)) else {
            throw CommandFailure.runtime("cannot write \(TerminalText.escape(file))")
        }
        print(
            "wrote \(TerminalText.escape(file)): \(codes.count) codes (print it, then: plings-bridge scanners --calibrate)"
        )
        return 0
    }

    /// The keyboard-wedge scanners `--calibrate` and `--test` read: `--device`, else every matched one, each with
    /// the layout its configuration gives it.
    private func keyboardScanners(_ args: Arguments, _ settings: Settings) throws -> [(
        node: String, name: String, layout: String
    )] {
        let hid = settings.config.hid
        if let device = args.value("--device") { return [(device, device, hid.layout)] }
        let scanners = HIDSource.scan(config: hid).filter(\.matched).map {
            ($0.devnode, $0.stableName ?? $0.name, $0.layout ?? hid.layout)
        }
        guard !scanners.isEmpty else {
            throw CommandFailure.runtime(
                "no keyboard-wedge scanner found: plug one in (plings-bridge scanners lists what udev sees), or name "
                    + "its node with --device /dev/input/eventN")
        }
        return scanners
    }

    /// `scanners --test --count N`: bench acceptance. Each scan (of `--expect TEXT`, else of any code on the
    /// calibration sheet) is decoded with the scanner's configured layout and compared with the text; per scan the
    /// characters it got wrong and the typing time (first key press to Enter, by the kernel's event times). The
    /// same `--report`/`--junit` and pass criteria as `test-read`.
    private func scannerTest(_ args: Arguments, _ settings: Settings) throws -> Int32 {
        let count =
            try args.positiveNumber("--count") ?? 10
        let timeout = try args.value("--timeout").map { try DurationText.wait($0, flag: "--timeout") } ?? 60
        let criteria = try Self.criteria(args)
        let scanners = try keyboardScanners(args, settings)
        let expected = args.value("--expect").map { [$0] } ?? CalibrationSheet.contents.map(\.text)
        var layouts: [String: KeyboardLayout] = [:]
        for scanner in scanners {
            do {
                layouts[scanner.name] = try XKBLayouts.layout(scanner.layout)
            } catch {
                throw CommandFailure.config("hid.layout '\(scanner.layout)': \(error.description)")
            }
        }
        let capture: KeystrokeCapture
        do {
            capture = try KeystrokeCapture(scanners.map { ($0.node, $0.name) })
        } catch {
            throw CommandFailure.runtime(error.description)
        }
        defer { capture.close() }
        logger.info(
            "scanners --test: scan \(count) time(s)",
            [("scanners", scanners.map(\.name).joined(separator: ", ")), ("timeout", "\(Int(timeout)) s per scan")])
        let startedAt = Date()
        let began = MonotonicClock.now()
        var attempts: [TestRunReport.Attempt] = []
        while attempts.count < count {
            let line: KeystrokeCapture.Line?
            do {
                line = try capture.nextLine(deadline: MonotonicClock.deadline(after: timeout))
            } catch {
                throw CommandFailure.runtime(error.description)
            }
            guard let line, let layout = layouts[line.device] ?? layouts.values.first else {
                logger.error("scanners --test: no scan within \(Int(timeout)) s")
                break
            }
            let judged = ScannerTestRun.judge(line, layout: layout, expected: expected, number: attempts.count + 1)
            let (attempt, typed, target, ok, error) = (
                judged.attempt, judged.typed, judged.target, judged.attempt.ok, judged.attempt.error
            )
            attempts.append(attempt)
            let text =
                args.json
                ? JSONValue.object([
                    ("scan", .integer(attempt.number)), ("device", .string(line.device)), ("ok", .bool(ok)),
                    ("typed", .string(typed)), ("expected", .string(target)),
                    ("wrong", .array(judged.wrong.map { .string(String($0)) })),
                    ("typingMs", line.typingMilliseconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null),
                ]).encoded()
                : "scan \(attempt.number): \(TerminalText.escape(line.device))  \(ok ? "ok" : "WRONG")  "
                    + "\(line.typingMilliseconds.map { String(format: "%.1f ms", $0) } ?? "-")"
                    + (error.map { "\n  \($0)" } ?? "")
            FileHandle.standardOutput.write(Data((text + "\n").utf8))
        }
        let report = ScannerTestRun.report(
            scanners: scanners, expected: expected, attempts: attempts, requested: count,
            criteria: criteria ?? TestRunReport.Criteria(), startedAt: startedAt, seconds: MonotonicClock.now() - began)
        try writeReports(args, report: report, command: "scanners --test")
        let summary =
            "summary: \(report.okCount)/\(count) scanned right (\(String(format: "%.0f", report.successPercent))%); "
            + "typing median \(report.median.map { String(format: "%.1f", $0) } ?? "-") ms, "
            + "p95 \(report.p95.map { String(format: "%.1f", $0) } ?? "-") ms"
        print(
            args.json
                ? JSONValue.object([("summary", .string(summary)), ("passed", .bool(report.passed))]).encoded()
                : summary)
        if !report.passed { logger.error("scanners --test: FAIL: \(report.failures.joined(separator: "; "))") }
        return report.passed ? 0 : 1
    }
}
