import BridgeCore
import Foundation

/// `scanners --test`: what one scan of a bench acceptance run means and the run's report. Each scan is decoded with
/// the scanner's layout and judged against the expected text it gets fewest characters wrong of; the CLI reads the
/// scans and prints what this says.
public enum ScannerTestRun {
    /// One scan judged.
    public struct Judgement: Sendable {
        public let attempt: TestRunReport.Attempt
        /// What the scanner typed, read with the layout (empty when it typed nothing the layout can read).
        public let typed: String
        /// The expected text this scan meant.
        public let target: String
        /// The characters of `target` it got wrong, each once, in order.
        public let wrong: [Character]
    }

    /// Judges scan number `number`: the expected text it meant is the one it gets fewest characters wrong of.
    public static func judge(
        _ line: KeystrokeCapture.Line, layout: KeyboardLayout, expected: [String], number: Int
    ) -> Judgement {
        let readings = expected.map { LayoutCalibration.read(line.events, layout: layout, expected: $0) }
        let best = readings.min { $0.unmatched.count < $1.unmatched.count } ?? readings[0]
        let typed = best.decoded ?? ""
        let target = expected[readings.firstIndex { $0 == best } ?? 0]
        let ok = typed == target
        let error =
            ok
            ? nil
            : "typed \(TerminalText.escape(typed).prefix(120)) for \(TerminalText.escape(target).prefix(120)): "
                + "\(best.unmatched.count) character(s) wrong "
                + "(\(best.unmatched.map { TerminalText.escape(String($0)) }.joined(separator: " ")))"
        let attempt = TestRunReport.Attempt(
            number: number, ok: ok, milliseconds: line.typingMilliseconds,
            details: [
                ("scanner", line.device), ("layout", layout.name), ("characters", String(typed.count)),
                ("wrong", String(best.unmatched.count)),
            ], error: error)
        return Judgement(attempt: attempt, typed: typed, target: target, wrong: best.unmatched)
    }

    /// The run's report: the scanners, their layouts and the expected text, then one attempt per scan.
    public static func report(
        scanners: [(node: String, name: String, layout: String)], expected: [String],
        attempts: [TestRunReport.Attempt], requested: Int, criteria: TestRunReport.Criteria, startedAt: Date,
        seconds: Double
    ) -> TestRunReport {
        TestRunReport(
            title: "Scanner test: \(scanners.map(\.name).joined(separator: ", "))", suite: "scanners-test",
            setup: [
                ("scanners", scanners.map { "\($0.name) (\($0.node))" }.joined(separator: ", ")),
                ("layouts", scanners.map(\.layout).joined(separator: ", ")),
                ("expected", expected.count == 1 ? expected[0] : "any code of the calibration sheet"),
                ("plings-bridge", BridgeVersion.current),
            ], attempts: attempts, requested: requested, criteria: criteria, startedAt: startedAt,
            seconds: seconds, attemptName: "scan", timeName: "Typing times (first key press to Enter)")
    }
}
