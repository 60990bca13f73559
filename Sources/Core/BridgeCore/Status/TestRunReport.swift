import Foundation

/// A tester's report of one run of taps or scans (`test-read`, issue 26): what was tested, each attempt with its
/// outcome and time, the distribution, and a verdict against optional pass criteria. Renders a self-contained HTML
/// page (inline SVG, no script) and JUnit XML (one test case per attempt plus one for the criteria, as Jenkins and
/// GitLab read it). Pure: the command fills it and writes the text.
public struct TestRunReport: Sendable {
    public struct Attempt: Sendable {
        public var number: Int
        public var ok: Bool
        /// Detect-to-read (or keystroke-to-line) time in milliseconds; nil when there was no read.
        public var milliseconds: Double?
        /// Short columns for the timeline (tag kind, UID, APDUs...), in order.
        public var details: [(String, String)]
        public var error: String?

        public init(number: Int, ok: Bool, milliseconds: Double?, details: [(String, String)], error: String?) {
            self.number = number
            self.ok = ok
            self.milliseconds = milliseconds
            self.details = details
            self.error = error
        }
    }

    public struct Criteria: Sendable, Equatable {
        public var maxP95Milliseconds: Double?
        public var minSuccessPercent: Double?
        public init(maxP95Milliseconds: Double? = nil, minSuccessPercent: Double? = nil) {
            self.maxP95Milliseconds = maxP95Milliseconds
            self.minSuccessPercent = minSuccessPercent
        }
    }

    public var title: String
    /// The suite's name in JUnit (`test-read`).
    public var suite: String
    /// What was tested: reader, ATR, profile, driver checks, versions.
    public var setup: [(String, String)]
    public var attempts: [Attempt]
    public var requested: Int
    public var criteria: Criteria
    public var startedAt: Date
    public var seconds: Double
    /// What one attempt is called (`tap`, `scan`) and what its time measures.
    public var attemptName: String
    public var timeName: String

    public init(
        title: String, suite: String, setup: [(String, String)], attempts: [Attempt], requested: Int,
        criteria: Criteria, startedAt: Date, seconds: Double, attemptName: String = "tap",
        timeName: String = "Detect-to-read times"
    ) {
        self.attemptName = attemptName
        self.timeName = timeName
        self.title = title
        self.suite = suite
        self.setup = setup
        self.attempts = attempts
        self.requested = requested
        self.criteria = criteria
        self.startedAt = startedAt
        self.seconds = seconds
    }

    // MARK: figures

    public var okCount: Int { attempts.filter(\.ok).count }
    /// Successes over the attempts requested (one never made counts as failed).
    public var successPercent: Double { requested == 0 ? 0 : Double(okCount) * 100 / Double(requested) }
    var times: [Double] { attempts.filter(\.ok).compactMap(\.milliseconds).sorted() }
    public var median: Double? { Self.percentile(times, 0.5) }
    public var p95: Double? { Self.percentile(times, 0.95) }
    public var maximum: Double? { times.last }

    /// Nearest-rank percentile of sorted values.
    public static func percentile(_ sorted: [Double], _ p: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((p * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// Why the run fails: the criteria not met, and attempts that failed or were never made.
    public var failures: [String] {
        var reasons: [String] = []
        let failed = attempts.filter { !$0.ok }.count
        if failed > 0 { reasons.append("\(failed) of \(requested) failed") }
        if attempts.count < requested { reasons.append("\(requested - attempts.count) of \(requested) not made") }
        reasons += criteriaFailures
        return reasons
    }

    var criteriaFailures: [String] {
        var reasons: [String] = []
        if let limit = criteria.maxP95Milliseconds {
            if let p95 {
                if p95 > limit { reasons.append("p95 \(Self.ms(p95)) ms is over \(Self.ms(limit)) ms") }
            } else {
                reasons.append("no time measured for p95")
            }
        }
        if let minimum = criteria.minSuccessPercent, successPercent < minimum {
            reasons.append("success \(Self.ms(successPercent))% is under \(Self.ms(minimum))%")
        }
        return reasons
    }

    /// With criteria, only they decide (a lab may accept 98%); without, every attempt must succeed.
    public var passed: Bool {
        criteria == Criteria() ? failures.isEmpty : criteriaFailures.isEmpty && attempts.count == requested
    }

    /// Milliseconds with one decimal, as every report and tap line writes them.
    public static func ms(_ value: Double) -> String { String(format: "%.1f", value) }

    // MARK: histogram

    /// Bins of a "nice" width (1, 2 or 5 times a power of ten) so the times fall in at most `maxBins` bins from 0.
    public struct Histogram: Sendable, Equatable {
        public var width: Double
        public var counts: [Int]
    }

    public func histogram(maxBins: Int = 20) -> Histogram {
        guard let top = maximum, top > 0 else { return Histogram(width: 1, counts: times.isEmpty ? [] : [times.count]) }
        var width = 1.0
        let raw = top / Double(maxBins)
        let magnitude = pow(10, floor(log10(raw)))
        for factor in [1.0, 2.0, 5.0, 10.0] where factor * magnitude >= raw {
            width = factor * magnitude
            break
        }
        let bins = max(1, Int((top / width).rounded(.down)) + 1)
        var counts = [Int](repeating: 0, count: bins)
        for time in times { counts[min(bins - 1, Int(time / width))] += 1 }
        return Histogram(width: width, counts: counts)
    }

    // MARK: HTML

    public func html() -> String {
        let verdict = passed ? "PASS" : "FAIL"
        var page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(Self.escape(title))</title>
            <style>
            body { font: 12pt/1.35 sans-serif; margin: 1.5cm; color: #111; }
            h1 { font-size: 16pt; margin: 0 0 .2em; } h2 { font-size: 12pt; margin: 1.2em 0 .3em; }
            table { border-collapse: collapse; width: 100%; font-size: 9pt; }
            th, td { border-bottom: 1px solid #ccc; padding: 2px 4px; text-align: left; vertical-align: top; }
            .pass { color: #1a7f37; } .fail { color: #c62828; }
            .verdict { font-size: 20pt; font-weight: bold; }
            tr.failed td { background: #fde8e8; }
            @media print { body { margin: 1cm; } tr { break-inside: avoid; } }
            </style></head><body>
            <h1>\(Self.escape(title))</h1>
            <p class="verdict \(passed ? "pass" : "fail")">\(verdict)</p>
            <p>\(okCount) of \(requested) succeeded (\(Self.ms(successPercent))%); median \(median.map(Self.ms) ?? "-") ms, \
            p95 \(p95.map(Self.ms) ?? "-") ms, max \(maximum.map(Self.ms) ?? "-") ms. \
            \(Self.escape(failures.joined(separator: "; ")))</p>
            <h2>Setup</h2><table>
            """
        for (key, value) in setup + [("started", ISO8601DateFormatter().string(from: startedAt))] + criteriaRows {
            page += "<tr><th>\(Self.escape(key))</th><td>\(Self.escape(value))</td></tr>\n"
        }
        page += "</table>\n<h2>\(Self.escape(timeName))</h2>\n" + histogramSVG()
        page += "\n<h2>\(Self.escape(attemptName.capitalized))s</h2>\n<table><tr><th>#</th>"
        page += "<th>outcome</th><th>ms</th>"
        let columns = attempts.first?.details.map(\.0) ?? []
        for column in columns { page += "<th>\(Self.escape(column))</th>" }
        page += "<th>error</th></tr>\n"
        for attempt in attempts {
            page += "<tr class=\"\(attempt.ok ? "ok" : "failed")\"><td>\(attempt.number)</td>"
            page += "<td>\(attempt.ok ? "ok" : "failed")</td><td>\(attempt.milliseconds.map(Self.ms) ?? "-")</td>"
            for value in attempt.details.map(\.1) { page += "<td>\(Self.escape(value))</td>" }
            page += "<td>\(Self.escape(attempt.error ?? ""))</td></tr>\n"
        }
        return page + "</table>\n</body></html>\n"
    }

    var criteriaRows: [(String, String)] {
        var rows: [(String, String)] = [("requested", String(requested))]
        if let limit = criteria.maxP95Milliseconds { rows.append(("pass if p95 at most", "\(Self.ms(limit)) ms")) }
        if let minimum = criteria.minSuccessPercent {
            rows.append(("pass if success at least", "\(Self.ms(minimum))%"))
        }
        return rows
    }

    /// One bar per bin (`class="bar"`, `data-count`, `data-from`/`data-to` in ms), lines for median, p95, max.
    func histogramSVG() -> String {
        let bins = histogram()
        let (width, height, left, bottom) = (640.0, 200.0, 40.0, 30.0)
        let plotWidth = width - left - 10
        let plotHeight = height - bottom - 10
        let most = Double(bins.counts.max() ?? 1)
        let range = bins.width * Double(max(1, bins.counts.count))
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="10">
            <line x1="\(left)" y1="\(height - bottom)" x2="\(width - 10)" y2="\(height - bottom)" stroke="#333"/>

            """
        let barWidth = plotWidth / Double(max(1, bins.counts.count))
        for (index, count) in bins.counts.enumerated() {
            let h = most == 0 ? 0 : plotHeight * Double(count) / most
            let x = left + Double(index) * barWidth
            svg +=
                "<rect class=\"bar\" data-count=\"\(count)\" data-from=\"\(Self.number(Double(index) * bins.width))\" "
            svg += "data-to=\"\(Self.number(Double(index + 1) * bins.width))\" x=\"\(Self.number(x + 1))\" "
            svg += "y=\"\(Self.number(height - bottom - h))\" width=\"\(Self.number(max(1, barWidth - 2)))\" "
            svg += "height=\"\(Self.number(h))\" fill=\"#5b8def\"/>\n"
            if index % max(1, bins.counts.count / 10) == 0 {
                svg += "<text x=\"\(Self.number(x))\" y=\"\(Self.number(height - bottom + 12))\">"
                svg += "\(Self.number(Double(index) * bins.width))</text>\n"
            }
        }
        for (label, value, colour) in [
            ("median", median, "#1a7f37"), ("p95", p95, "#e08a00"), ("max", maximum, "#c62828"),
        ] {
            guard let value else { continue }
            let x = left + plotWidth * value / range
            svg += "<line class=\"mark\" data-mark=\"\(label)\" x1=\"\(Self.number(x))\" y1=\"10\" "
            svg +=
                "x2=\"\(Self.number(x))\" y2=\"\(Self.number(height - bottom))\" stroke=\"\(colour)\" stroke-dasharray=\"4 2\"/>"
            svg += "<text x=\"\(Self.number(x + 2))\" y=\"20\" fill=\"\(colour)\">\(label) \(Self.ms(value))</text>\n"
        }
        svg += "<text x=\"\(Self.number(width - 10))\" y=\"\(Self.number(height - 2))\" text-anchor=\"end\">ms</text>\n"
        return svg + "</svg>"
    }

    // MARK: JUnit

    /// JUnit XML: one `testcase` per attempt requested (a failure with the error; one never made fails as such)
    /// and one for the pass criteria.
    public func junit() -> String {
        let failuresCount = attempts.filter { !$0.ok }.count + (requested - attempts.count) + (passedCriteria ? 0 : 1)
        let name = Self.escape(suite)
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="\(name)" tests="\(requested + 1)" failures="\(failuresCount)" errors="0" \
            time="\(Self.number(seconds))">
            <testsuite name="\(name)" tests="\(requested + 1)" failures="\(failuresCount)" errors="0" skipped="0" \
            time="\(Self.number(seconds))" timestamp="\(ISO8601DateFormatter().string(from: startedAt))">
            <properties>

            """
        for (key, value) in setup {
            xml += "<property name=\"\(Self.escape(key))\" value=\"\(Self.escape(value))\"/>\n"
        }
        xml += "</properties>\n"
        for number in 1...max(1, requested) where requested > 0 {
            let attempt = attempts.first { $0.number == number }
            let time = (attempt?.milliseconds ?? 0) / 1000
            xml +=
                "<testcase classname=\"\(name)\" name=\"\(Self.escape(attemptName)) \(number)\" time=\"\(Self.number(time))\""
            if let attempt, attempt.ok {
                xml += "/>\n"
            } else {
                let message = attempt?.error ?? (attempt == nil ? "not made (timed out)" : "failed")
                xml += "><failure message=\"\(Self.escape(message))\" type=\"\(attempt == nil ? "timeout" : "read")\"/>"
                xml += "</testcase>\n"
            }
        }
        xml += "<testcase classname=\"\(name)\" name=\"pass criteria\" time=\"0\""
        if passedCriteria {
            xml += "/>\n"
        } else {
            xml += "><failure message=\"\(Self.escape(criteriaFailures.joined(separator: "; ")))\" type=\"criteria\"/>"
            xml += "</testcase>\n"
        }
        return xml + "</testsuite>\n</testsuites>\n"
    }

    var passedCriteria: Bool { criteriaFailures.isEmpty }

    static func number(_ value: Double) -> String { MarkupText.number(value) }

    static func escape(_ text: String) -> String { MarkupText.escape(text) }
}
