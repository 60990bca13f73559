import BridgeCore
import Foundation
import Logging
import NFC
import Platform

/// `readers` and `test-read`: the PC/SC commands for installers and hardware testers.
extension CLI {
    // MARK: readers

    func readers(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("readers takes no arguments") }
        let config = try settings(args).config
        let listing = NFCReaders.list()
        let patterns = config.nfc.readers
        if args.json {
            let items = listing.readers.map { reader -> JSONValue in
                let profile = ReaderProfile.resolve(readerName: reader.name, rules: config.nfc.profiles)
                return .object([
                    ("name", .string(reader.name)),
                    ("device", .string(config.nfc.name(of: reader.name, identity: reader.identity))),
                    ("path", reader.identity.path.map { .string($0) } ?? .null),
                    ("serial", reader.identity.serial.map { .string($0) } ?? .null),
                    ("profile", .string(profile.rawValue)),
                    ("feedback", profile.feedback.map { .string($0.rawValue) } ?? .null),
                    ("fastRead", profile.fastRead.map { .string($0.rawValue) } ?? .null),
                    ("detectBeepSilencing", .bool(profile.canSilenceDetectBeep)),
                    ("iso15693", .bool(profile.readsISO15693)),
                    ("cardPresent", .bool(reader.cardPresent)),
                    ("atr", reader.atr.map { .string(NFCHex.bytes($0, separator: "")) } ?? .null),
                    ("tagKind", reader.tagKind.map { .string($0.code) } ?? .null),
                    ("tagName", reader.tagKind.map { .string($0.description) } ?? .null),
                    ("uid", reader.uid.map { .string(NFCHex.uid($0)) } ?? .null),
                    ("selected", .bool(NFCSource.matches(reader.name, patterns: patterns))),
                    ("note", reader.note.map { .string($0) } ?? .null),
                ])
            }
            print(JSONValue.array(items).encoded())
            if let problem = listing.problem { logger.warn(problem) }
            return 0
        }
        if let problem = listing.problem {
            show("no readers: \(problem)")
            return 0
        }
        if listing.readers.isEmpty {
            print("no readers: pcscd is running but reports no reader (plugged in? driver installed?)")
            return 0
        }
        for reader in listing.readers {
            let selected = NFCSource.matches(reader.name, patterns: patterns) ? "" : "  (not selected by nfc.readers)"
            show("\(reader.name)\(selected)")
            let device = config.nfc.name(of: reader.name, identity: reader.identity)
            if device != reader.name { show("  name:  \(device) (nfc.names)") }
            if let path = reader.identity.path {
                show("  port:  \(path)" + (reader.identity.serial.map { "  serial: \($0)" } ?? ""))
            } else {
                show("  port:  unknown: \(reader.identity.note ?? "no USB channel")")
            }
            let profile = ReaderProfile.resolve(readerName: reader.name, rules: config.nfc.profiles)
            print("  profile: \(profile.rawValue) (\(profile.capabilities))")
            guard reader.cardPresent else {
                print("  no card")
                continue
            }
            show("  card:  \(reader.tagKind.map { $0.description } ?? "unknown")")
            show("  ATR:   \(reader.atr.map { NFCHex.bytes($0, separator: "") } ?? "-")")
            show("  UID:   \(reader.uid.map(NFCHex.uid) ?? "-")" + (reader.note.map { "  (\($0))" } ?? ""))
        }
        return 0
    }

    // MARK: test-read

    func testRead(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("test-read takes no arguments") }
        let count =
            try args.positiveNumber("--count") ?? 1
        let timeout =
            try args.value("--timeout").map { try DurationText.wait($0, flag: "--timeout") } ?? 60
        let config = try settings(args).config
        var nfc = config.nfc
        if let reader = args.value("--reader") { nfc.readers = [reader] }

        // test-read reads and reports; it spools nothing (the submit is a no-op). Taps arrive on the reader's
        // thread; this command waits for them on the main thread, each wait on the monotonic clock.
        _ = try Self.criteria(args)  // a malformed criterion is refused before the first tap
        let startedAt = Date()
        let began = MonotonicClock.now()
        let taps = Monitor([NFCTapEvent]())
        let source = NFCSource(
            config: nfc, hosts: config.hosts, logger: logger, submit: { _ in },
            onTap: { event in taps.update { $0.append(event) } }, askFirmware: true)
        let json = args.json
        let target = nfc.readers.isEmpty ? "any reader" : nfc.readers.joined(separator: ", ")
        logger.info("test-read: tap \(count) tag(s) on \(target)", [("timeout", "\(timeout)s per tap")])
        let logger = self.logger
        let (events, timedOut) = { () -> ([NFCTapEvent], Bool) in
            source.start()
            defer { source.stop() }
            var seen = 0
            while seen < count {
                // The timeout runs from the previous tap (or the start), whatever arrived meanwhile.
                guard taps.wait(until: MonotonicClock.deadline(after: timeout), for: { $0.count > seen }) else {
                    logger.error("test-read: no tap within \(timeout)s", [("status", source.summary)])
                    return (Array(taps.withLock { $0 }.prefix(count)), true)
                }
                for event in taps.withLock({ Array($0[seen...]) }) where seen < count {
                    seen += 1
                    // Each tap as it happens, also into a pipe (`test-read --json | jq`), where print() would hold
                    // it in stdout's buffer until the run ends: one write(2) per tap.
                    let text = json ? Self.tapJSON(event, number: seen).encoded() : Self.tapLine(event, number: seen)
                    FileHandle.standardOutput.write(Data((text + "\n").utf8))
                }
            }
            return (Array(taps.withLock { $0 }.prefix(count)), false)
        }()

        try writeReports(args, events: events, requested: count, startedAt: startedAt, began: began, nfc: nfc)
        if let criteria = try Self.criteria(args) {
            // Pass criteria decide the exit code (a lab may accept a failed tap in a hundred).
            let report = NFCTestRun.report(
                events, requested: count, criteria: criteria, startedAt: startedAt, began: began, nfc: nil)
            Self.printSummary(events, count: count, timedOut: timedOut, json: json)
            if !report.passed { logger.error("test-read: FAIL: \(report.failures.joined(separator: "; "))") }
            return report.passed ? 0 : 1
        }
        Self.printSummary(events, count: count, timedOut: timedOut, json: json)
        return events.allSatisfy(\.succeeded) && !timedOut ? 0 : 1
    }

    /// The summary line (or object) after the taps.
    static func printSummary(_ events: [NFCTapEvent], count: Int, timedOut: Bool, json: Bool) {
        let readTimes = events.filter(\.succeeded).map { $0.detectToReadSeconds * 1000 }.sorted()
        let failed = events.filter { !$0.succeeded }.count
        let missing = count - events.count
        let rate = Double(events.count - failed) / Double(count)
        if json {
            print(
                JSONValue.object([
                    (
                        "summary",
                        .object([
                            ("taps", .integer(events.count)), ("requested", .integer(count)),
                            ("ok", .integer(events.count - failed)), ("failed", .integer(failed)),
                            ("timedOut", .bool(timedOut)), ("successRate", .number(rate)),
                            ("medianReadMs", TestRunReport.percentile(readTimes, 0.5).map { .number($0) } ?? .null),
                            ("p95ReadMs", TestRunReport.percentile(readTimes, 0.95).map { .number($0) } ?? .null),
                        ])
                    )
                ]).encoded())
        } else {
            let median = TestRunReport.percentile(readTimes, 0.5).map { TestRunReport.ms($0) } ?? "-"
            let p95 = TestRunReport.percentile(readTimes, 0.95).map { TestRunReport.ms($0) } ?? "-"
            print(
                "summary: \(events.count - failed)/\(count) read (\(Int((rate * 100).rounded()))%), "
                    + "\(failed) failed\(missing > 0 ? ", \(missing) not tapped" : ""); "
                    + "detect-to-read median \(median) ms, p95 \(p95) ms")
        }
    }

    /// `--max-p95 MS` and `--min-success PCT`, or nil when neither is given.
    static func criteria(_ args: Arguments) throws -> TestRunReport.Criteria? {
        func number(_ flag: String, _ range: ClosedRange<Double>) throws -> Double? {
            try args.value(flag).map { text in
                guard let value = Double(text), range.contains(value) else {
                    throw CommandFailure.usage(
                        "\(flag) takes a number from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
                }
                return value
            }
        }
        let p95 = try number("--max-p95", 0...3_600_000)
        let success = try number("--min-success", 0...100)
        return p95 == nil && success == nil
            ? nil : TestRunReport.Criteria(maxP95Milliseconds: p95, minSuccessPercent: success)
    }

    /// `--report FILE.html` and `--junit FILE.xml` of `test-read`, written whatever the outcome.
    func writeReports(
        _ args: Arguments, events: [NFCTapEvent], requested: Int, startedAt: Date, began: Double,
        nfc: BridgeConfig.NFC
    ) throws {
        guard args.value("--report") != nil || args.value("--junit") != nil else { return }
        let report = NFCTestRun.report(
            events, requested: requested, criteria: try Self.criteria(args) ?? TestRunReport.Criteria(),
            startedAt: startedAt, began: began, nfc: nfc)
        try writeReports(args, report: report, command: "test-read")
    }

    /// Writes `report` where `--report` (HTML) and `--junit` (JUnit XML) say.
    func writeReports(_ args: Arguments, report: TestRunReport, command: String) throws {
        for (flag, text) in [("--report", report.html()), ("--junit", report.junit())] {
            guard let path = args.value(flag) else { continue }
            guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) else {
                throw CommandFailure.runtime("\(flag): cannot write \(TerminalText.escape(path))")
            }
            logger.info("\(command): wrote \(flag == "--report" ? "the report" : "the JUnit XML")", [("path", path)])
        }
    }

    static func tapJSON(_ event: NFCTapEvent, number: Int) -> JSONValue {
        let result = event.result
        return .object([
            ("tap", .integer(number)),
            ("reader", .string(event.reader)),
            ("device", .string(event.device ?? event.reader)),
            ("path", event.identity?.path.map { .string($0) } ?? .null),
            ("serial", event.identity?.serial.map { .string($0) } ?? .null),
            ("profile", .string(event.profile.rawValue)),
            ("firmware", event.firmware.map { .string($0) } ?? .null),
            ("genuine", event.read?.genuine?.json ?? .null),
            ("product", result?.product.map { .string($0.name) } ?? .null),
            ("feedback", event.profile.feedback.map { .string($0.rawValue) } ?? .null),
            ("fastRead", .string(result?.fastRead.code ?? "notTried")),
            ("fastReadFallback", result?.fastRead.fallbackReason.map { .string($0) } ?? .null),
            ("ok", .bool(event.succeeded)),
            ("uid", event.uidHex.map { .string($0) } ?? .null),
            ("tagKind", .string(event.kind.code)),
            ("tagName", .string(event.kind.description)),
            ("atr", .string(NFCHex.bytes(event.atr, separator: ""))),
            ("url", event.read.map { $0.raw.isEmpty ? .null : .string($0.raw) } ?? .null),
            ("uris", .array((result?.uris ?? []).map { .string($0) })),
            ("noURLReason", result?.noURLReason.map { .string($0) } ?? .null),
            ("ndef", result?.ndef.map { .string(NFCHex.uid($0)) } ?? .null),
            ("apduCount", .integer(event.apduCount)),
            ("connectMs", .number(round3(event.connectSeconds * 1000))),
            ("readMs", .number(round3(event.readSeconds * 1000))),
            ("detectToReadMs", .number(round3(event.detectToReadSeconds * 1000))),
            ("detectedAt", .string(Timestamp.format(event.detectedAt))),
            ("error", event.error.map { .string($0) } ?? .null),
        ])
    }

    /// The tap's human lines; outside text (reader name, URL, reasons) escaped line by line (`TerminalText`).
    static func tapLine(_ event: NFCTapEvent, number: Int) -> String {
        let e = TerminalText.escape
        var line = "tap \(number): \(e(event.reader))  \(event.kind)  uid \(event.uidHex ?? "-")"
        line += "\n  profile: \(event.profile.rawValue) (\(event.profile.capabilities))"
        if let firmware = event.firmware { line += "\n  firmware: \(e(firmware))" }
        if let product = event.result?.product { line += "\n  product: \(e(product.name)) (GET_VERSION)" }
        if let genuine = event.read?.genuine {
            line +=
                "\n  originality: "
                + [
                    .genuine: "genuine NXP chip (signature verified)",
                    .notGenuine: "NOT a genuine NXP chip (the signature does not match the UID)",
                    .unknown: "unknown (no signature, no product, or no published key for this product)",
                ][genuine, default: ""]
        }
        if let error = event.error {
            line += "\n  FAILED: \(e(error))"
        } else if let read = event.read, !read.raw.isEmpty {
            line += "\n  URL: \(e(read.raw))"
        } else {
            line += "\n  no URL: \(e(event.result?.noURLReason ?? "unknown"))"
        }
        line +=
            "\n  \(event.apduCount) APDUs, connect \(TestRunReport.ms(event.connectSeconds * 1000)) ms, "
            + "read \(TestRunReport.ms(event.readSeconds * 1000)) ms, "
            + "detect-to-read \(TestRunReport.ms(event.detectToReadSeconds * 1000)) ms"
        switch event.result?.fastRead {
        case .used?: line += ", fast read"
        case .fellBack(let reason, _)?: line += "\n  fast read fell back to READ BINARY: \(reason)"
        default: break
        }
        return line
    }

    static func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}
