import BridgeCore
import Foundation
import Platform

/// `test-read`: the run's report (HTML and JUnit through `TestRunReport`), built from the taps; the CLI reads the
/// taps and prints.
public enum NFCTestRun {
    /// The report of a run: setup from the taps themselves (reader, ATR, profile, tag kinds), one attempt per tap.
    /// `nfc`: the section whose driver checks (`doctor`'s pcscd, reader and driver findings) the setup lists.
    public static func report(
        _ events: [NFCTapEvent], requested: Int, criteria: TestRunReport.Criteria, startedAt: Date, began: Double,
        nfc: BridgeConfig.NFC?
    ) -> TestRunReport {
        func distinct(_ values: [String]) -> String {
            var seen: [String] = []
            for value in values where !seen.contains(value) { seen.append(value) }
            return seen.isEmpty ? "-" : seen.joined(separator: ", ")
        }
        var system = utsname()
        uname(&system)
        let kernel = withUnsafeBytes(of: &system.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let setup: [(String, String)] =
            [
                ("reader", distinct(events.map(\.reader))),
                ("ATR", distinct(events.map { NFCHex.bytes($0.atr, separator: " ") })),
                ("profile", distinct(events.map { "\($0.profile.rawValue) (\($0.profile.capabilities))" })),
                (
                    "firmware",
                    events.contains { $0.firmware != nil }
                        ? distinct(events.compactMap(\.firmware))
                        : "not reported (no version command in the reader's profile, or no answer)"
                ),
                ("tag kinds", distinct(events.map(\.kind.description))),
                ("plings-bridge", BridgeVersion.current), ("kernel", kernel),
            ]
            + (nfc.map { NFCDoctor.checks(config: $0) } ?? []).map { check in
                ("check: \(check.name)", "\(check.status.rawValue): \(check.message)")
            }
        let attempts = events.enumerated().map { index, event in
            TestRunReport.Attempt(
                number: index + 1, ok: event.succeeded,
                milliseconds: event.succeeded ? event.detectToReadSeconds * 1000 : nil,
                details: [
                    ("tag", event.kind.description), ("UID", event.uidHex ?? "-"), ("APDUs", String(event.apduCount)),
                    ("genuine", event.read?.genuine?.rawValue ?? "not checked"),
                    ("connect ms", TestRunReport.ms(event.connectSeconds * 1000)),
                    ("read ms", TestRunReport.ms(event.readSeconds * 1000)),
                    (
                        "URL",
                        event.read.map(\.raw).flatMap { $0.isEmpty ? nil : $0 } ?? event.result?.noURLReason ?? "-"
                    ),
                ], error: event.error)
        }
        return TestRunReport(
            title: "NFC test-read: \(distinct(events.map(\.reader)))", suite: "test-read", setup: setup,
            attempts: attempts, requested: requested, criteria: criteria, startedAt: startedAt,
            seconds: MonotonicClock.now() - began)
    }
}
