import Bridge
import BridgeCore
import Foundation
import HID
import Logging
import Spool
import Platform
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

    /// `scanners --watch`: runs the HID source until `--count` lines were read or `--duration` seconds passed
    /// (default: until killed), printing one JSON object per line as it is read (or committed).
    private func watchScanners(_ args: Arguments, _ settings: Settings) throws -> Int32 {
        let count = try args.value("--count").map { (text: String) throws -> Int in
            guard let n = Int(text), n > 0 else { throw CommandFailure.usage("--count must be a positive number") }
            return n
        }
        let duration = try args.value("--duration").map { try DurationText.wait($0, flag: "--duration") }
        let config = settings.config
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
        @Sendable func readJSON(_ read: Read) -> [(String, JSONValue)] {
            [
                ("device", .string(read.device)), ("raw", .string(read.raw)),
                ("time", .string(Timestamp.format(read.time))),
            ]
        }
        var pipeline: Pipeline?
        if args.has("--pipeline") {
            let spool = try openSpool(settings, create: true)
            pipeline = Pipeline(
                spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: config.hosts)),
                fixProvider: NoFixProvider(), debounce: [.hid: config.hid.debounce], logger: logger)
            pipeline?.start()
        }
        let submit: @Sendable (Read) -> Void
        if let pipeline {
            submit = { read in
                pipeline.submit(read) { outcome in
                    var fields = readJSON(read)
                    switch outcome {
                    case .accepted(let scan):
                        fields += [
                            ("outcome", .string("accepted")), ("id", .string(scan.id)),
                            ("state", .string(scan.state.rawValue)),
                        ]
                    case .debounced:
                        fields.append(("outcome", .string("debounced")))
                    case .refused(let why):
                        fields += [("outcome", .string("refused")), ("error", .string(why))]
                    }
                    emit(.object(fields))
                }
            }
        } else {
            submit = { read in emit(.object(readJSON(read))) }
        }
        var hid = config.hid
        hid.enabled = true
        let source = HIDSource(config: hid, logger: logger, submit: submit)
        source.start()
        logger.info("watching scanners", [("summary", source.summary)])
        if let duration {
            done.wait(until: MonotonicClock.deadline(after: duration)) { $0 }
        } else {
            done.wait { $0 }
        }
        source.stop()
        pipeline?.stop()
        return 0
    }

    /// `scanners --calibrate`: waits (up to `--timeout`, 60 s) for a keyboard-wedge scanner to read the calibration
    /// code, then names the xkb layout whose keys explain exactly what it typed (`LayoutCalibration`). Exit 0 when
    /// one does, 1 when none does or nothing was scanned.
    private func calibrate(_ args: Arguments, _ settings: Settings) throws -> Int32 {
        let timeout = try args.value("--timeout").map { try DurationText.wait($0, flag: "--timeout") } ?? 60
        let scanners: [(node: String, name: String)]
        if let device = args.value("--device") {
            scanners = [(device, device)]
        } else {
            scanners = HIDSource.scan(config: settings.config.hid).filter(\.matched).map {
                ($0.devnode, $0.stableName ?? $0.name)
            }
        }
        guard !scanners.isEmpty else {
            throw CommandFailure.runtime(
                "no keyboard-wedge scanner found: plug one in (plings-bridge scanners lists what udev sees), or name "
                    + "its node with --device /dev/input/eventN")
        }
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
        let capture: CalibrationCapture.Capture?
        do {
            capture = try CalibrationCapture.capture(scanners, deadline: MonotonicClock.deadline(after: timeout))
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
}
