import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// `test-read --report/--junit` (issue 26) against the NFC rig: the HTML report is checked by parsing it (Python's
/// HTML parser: the histogram's bars and their counts, the taps' rows), the JUnit XML against Jenkins' JUnit schema
/// (`JUnitSchema`) and by `junitparser` (PyPI, the reader lab CI scripts use; its cases and failures), the pass criteria by the exit code; the HTML is rendered by
/// headless Chromium and kept as `.build/artifacts/test-read-report.png`.
extension NFCRigTests {
    @Suite struct TestReadReportTests {
        let binary = Products.path("plings-bridge")

        /// Four taps (three Plings tags and a phone, which fails) while `test-read --count 4` waits.
        func run(_ dir: TemporaryDirectory, _ extra: [String]) throws -> (status: Int32, stderr: String) {
            let rig = try NFCRig()
            defer { rig.close() }
            let test = try RunningProcess(
                binary, ["test-read", "--count", "4", "--timeout", "20", "--reader", "*00", "--json"] + extra,
                environment: Products.isolatedEnvironment(home: dir.path, reachesPCSCD: true))
            defer { test.stop() }
            let taps = [
                "ntag213 04A1B2C3D4E5F6 - url=\(NDEF.plingsURL)", "ntag215 04B1B2C3D4E5F7 - url=\(NDEF.plingsURL)",
                "phone 08112233 -", "ntag213 04C1B2C3D4E5F8 - url=\(NDEF.plingsURL)",
            ]
            for (index, tap) in taps.enumerated() {
                _ = try rig.send("tap 0 \(tap)")
                #expect(test.waitForLineCount(index + 1, timeout: 20), "\(test.stderrText)")
                _ = try rig.send("remove 0")
            }
            let status = test.waitForExit(timeout: 30) ?? -1
            return (status, test.stderrText)
        }

        @Test func theReportAndTheJUnitSayWhatHappened() throws {
            let dir = TemporaryDirectory("report")
            defer { dir.remove() }
            let html = dir.file("report.html")
            let junit = dir.file("report.xml")
            // 3 of 4 read: 75% passes a 70% criterion, and any p95 under a minute.
            let (status, stderr) = try run(
                dir, ["--report", html, "--junit", junit, "--min-success", "70", "--max-p95", "60000"])
            #expect(status == 0, "\(stderr)")

            let htmlCheck = """
                import json, sys
                from html.parser import HTMLParser
                class Report(HTMLParser):
                    def __init__(self):
                        super().__init__(); self.bars = []; self.rows = []; self.marks = []; self.verdict = None; self._v = False
                    def handle_starttag(self, tag, attrs):
                        a = dict(attrs)
                        if tag == "rect" and a.get("class") == "bar": self.bars.append(int(a["data-count"]))
                        if tag == "line" and a.get("class") == "mark": self.marks.append(a["data-mark"])
                        if tag == "tr" and a.get("class") in ("ok", "failed"): self.rows.append(a["class"])
                        if tag == "p" and "verdict" in (a.get("class") or ""): self._v = True
                    def handle_data(self, data):
                        if self._v: self.verdict = data.strip(); self._v = False
                r = Report(); r.feed(open(sys.argv[1], encoding="utf-8").read())
                print(json.dumps({"bars": r.bars, "rows": r.rows, "marks": r.marks, "verdict": r.verdict}))
                """
            let parsed = try ProcessRunner.run("/usr/bin/python3", ["-c", htmlCheck, html])
            let report = try JSONParser.parse(Array(parsed.stdout.utf8))
            guard case .array(let bars)? = report["bars"], case .array(let rows)? = report["rows"] else {
                Issue.record("report: \(parsed.stdout) \(parsed.stderr)")
                return
            }
            // Every successful tap is in exactly one bar; one row per tap, the phone's marked failed.
            #expect(bars.compactMap(\.intValue).reduce(0, +) == 3, "\(bars)")
            #expect(rows == ["ok", "ok", "failed", "ok"].map(JSONValue.string))
            #expect(report["marks"] == .array(["median", "p95", "max"].map(JSONValue.string)))
            #expect(report["verdict"] == .string("PASS"))
            // The setup names the reader and what doctor finds of pcscd and the drivers.
            let page = try String(contentsOfFile: html, encoding: .utf8)
            #expect(page.contains("Virtual PCD 00 00") && page.contains("check: pcscd</th><td>ok: pcscd reachable"))
            // A plain reader has no version command: the setup says so rather than leaving the row out.
            #expect(page.contains("<th>firmware</th><td>not reported"))

            let junitCheck = """
                import json, sys
                from junitparser import JUnitXml, Failure
                xml = JUnitXml.fromfile(sys.argv[1])
                cases = [c.name + "=" + "; ".join(r.message for r in c.result if isinstance(r, Failure)) for s in xml for c in s]
                print(json.dumps({"cases": cases}))
                """
            // Valid against the schema Jenkins documents, then read as lab CI scripts read it.
            #expect(try JUnitSchema.validate(junit).count == 2)
            let junitParsed = try ProcessRunner.run("/usr/bin/python3", ["-c", junitCheck, junit])
            #expect(junitParsed.status == 0, "junitparser: \(junitParsed.stderr)")
            guard case .array(let list)? = try JSONParser.parse(Array(junitParsed.stdout.utf8))["cases"] else {
                Issue.record("junitparser: \(junitParsed.stdout)")
                return
            }
            let cases = list.compactMap(\.stringValue)
            #expect(cases.count == 5, "\(cases)")
            #expect(cases.first == "tap 1=" && cases.last == "pass criteria=")
            #expect(cases.count > 2 && cases[2].hasPrefix("tap 3=") && cases[2].contains("phone"), "\(cases)")

            let artifacts = Products.packageRoot.appendingPathComponent(".build/artifacts").path
            try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
            let shot = artifacts + "/test-read-report.png"
            _ = try ProcessRunner.run(
                "/usr/bin/chromium",
                [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=900,1200",
                    "--user-data-dir=\(dir.file("chromium"))", "--screenshot=\(shot)", "file://\(html)",
                ], timeout: 120)
            #expect(FileManager.default.fileExists(atPath: shot))
        }

        @Test func aCriterionNotMetFailsTheRunAndTheJUnitSaysWhy() throws {
            let dir = TemporaryDirectory("report")
            defer { dir.remove() }
            let junit = dir.file("report.xml")
            let (status, stderr) = try run(dir, ["--junit", junit, "--min-success", "90"])
            #expect(status == 1)
            #expect(stderr.contains("FAIL: 1 of 4 failed; success 75.0% is under 90.0%"), "\(stderr)")
            let xml = try String(contentsOfFile: junit, encoding: .utf8)
            #expect(xml.contains(#"name="pass criteria""#) && xml.contains("success 75.0% is under 90.0%"))
        }
    }
}
