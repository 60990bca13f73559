import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import HID

/// Keyboard-country detection (issue 26): a scanner set to a country types the calibration code with that
/// country's keys; the detector, trying every layout and variant of xkb-data, must name that country (or a layout
/// that types every character of the code with the same keys, listed here as its equivalent). The keystrokes come
/// from each layout's table as compiled from xkb-data (`KeyboardLayout.keystrokeSequence`, whose tables
/// XKBGoldenTests checks key by key against libxkbcommon itself), pressed and released as a scanner does.
@Suite(.serialized)
struct CalibrationTests {
    /// Layouts scanners' keyboard-country lists offer, with the layouts xkb-data has that type the whole code with
    /// the same keys (so no scan can tell them apart).
    /// `pl` is the Polish programmers' layout (US keys); `ch(fr)` and `ch` differ only in letters outside ASCII,
    /// `se` and `fi` only on AltGr levels the code does not use.
    static let layouts: [(String, Set<String>)] = [
        ("us", []), ("gb", []), ("de", []), ("de(nodeadkeys)", []), ("fr", []), ("be", []), ("ch", []),
        ("ch(fr)", ["ch"]), ("it", []), ("es", []), ("pt", []), ("se", []), ("no", []), ("dk", []), ("fi", ["se"]),
        ("pl", ["us"]), ("cz", []), ("hu", []), ("tr", []), ("br", []), ("us(intl)", []), ("gb(extd)", []),
        ("latam", []), ("ca", []),
    ]

    @Test func everyCountryIsDetectedAsItselfOrAnEquivalent() throws {
        var report: [String] = []
        for (name, equivalents) in Self.layouts {
            let layout = try XKBLayouts.layout(name)
            guard let events = EventScript.typing(LayoutCalibration.text, layout: layout) else {
                Issue.record("\(name) cannot type the calibration code")
                continue
            }
            let verdict = ScannerCalibration.detect(events)
            report.append("\(name): \(verdict.layout ?? "none") \(verdict.candidates)")
            #expect(verdict.candidates.contains(layout.name), "\(name): \(verdict.candidates)")
            let allowed = equivalents.union([layout.name])
            #expect(verdict.layout.map(allowed.contains) == true, "\(name) detected as \(verdict.layout ?? "none")")
        }
        print(report.joined(separator: "\n"))
    }

    /// A scanner whose keys match no layout (here: a German scanner whose Z and Y keys were swapped in its own
    /// settings): no layout is claimed, and the closest one names what it could not produce.
    @Test func keystrokesNoLayoutExplainsAreSaidSo() throws {
        let us = try XKBLayouts.layout("us")
        guard let events = EventScript.typing(LayoutCalibration.text, layout: us) else { return }
        // Every `/` typed as the `-` key: what a half-configured scanner does.
        let damaged = events.map { event -> InputEvent in
            var copy = event
            if copy.type == Evdev.EV_KEY, copy.code == Evdev.KEY_SLASH { copy.code = Evdev.KEY_MINUS }
            return copy
        }
        let verdict = ScannerCalibration.detect(damaged)
        #expect(verdict.layout == nil && verdict.candidates.isEmpty)
        #expect(verdict.closest?.unmatched.contains("/") == true, "\(String(describing: verdict.closest))")
    }
}

/// `scanners --calibrate` through the real binary under umockdev: the Zebra scanner of Tests/Rigs/hid types the
/// calibration code with a country's keys (evemu playback on its evdev node), and the command names the country.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/umockdev-run")))
struct CalibrateCommandTests {
    let binary = Products.path("plings-bridge")

    /// `layouts` nil: the whole catalog (~1000 layouts and variants, ~10 s to compile).
    func calibrate(_ events: [InputEvent], layouts: String? = nil) throws -> (result: ProcessResult, json: JSONValue?) {
        let (result, lines) = try scanners(
            events, ["--calibrate", "--json", "--timeout", "30"] + (layouts.map { ["--layouts", $0] } ?? []))
        return (result, lines.last)
    }

    /// `plings-bridge scanners ARGUMENTS` with the Zebra scanner typing `events`; the JSON lines it printed.
    func scanners(_ events: [InputEvent], _ arguments: [String]) throws -> (result: ProcessResult, lines: [JSONValue]) {
        let dir = TemporaryDirectory("calibrate")
        defer { dir.remove() }
        let file = dir.file("event3.events")
        _ = FileManager.default.createFile(atPath: file, contents: Data(EventScript.evemuText(events).utf8))
        let result = try ProcessRunner.run(
            "/usr/bin/umockdev-run",
            [
                "-d", Products.rig("hid/zebra-event3.umockdev"), "-e", "/dev/input/event3=\(file)", "--", binary,
                "scanners",
            ] + arguments, environment: Products.isolatedEnvironment(home: dir.path), timeout: 90)
        return (result, result.stdoutLines.compactMap { try? JSONParser.parse(Array($0.utf8)) })
    }

    /// `scanners --test`: four scans of the sheet's Plings URL on a US scanner, the third with its `/` key sending
    /// `-`: three right, one wrong with the characters it got wrong; 75% passes `--min-success 70`, and the
    /// JUnit XML has the wrong scan as its one failure.
    @Test func theScannerTestComparesEveryScan() throws {
        let url = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVW&p=4.2.3.3.6"
        let us = try XKBLayouts.layout("us")
        var events: [InputEvent] = []
        for n in 0..<4 {
            var line = Script.typing(url, us, start: 1_000_000 + Int64(n) * 1_500_000)
            if n == 2 {
                line = line.map { event in
                    var copy = event
                    if copy.type == Evdev.EV_KEY, copy.code == Evdev.KEY_SLASH { copy.code = Evdev.KEY_MINUS }
                    return copy
                }
            }
            events += line
        }
        let dir = TemporaryDirectory("scanner-test")
        defer { dir.remove() }
        let junit = dir.file("scans.xml")
        let (result, lines) = try scanners(
            events, ["--test", "--count", "4", "--json", "--timeout", "30", "--junit", junit, "--min-success", "70"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let scans = lines.filter { $0["scan"] != nil }
        #expect(scans.map { $0["ok"] } == [true, true, false, true].map(JSONValue.bool), "\(result.stdout)")
        // On a US keyboard `?` is Shift and the `/` key: both come out wrong.
        #expect(scans.count == 4 && scans[2]["wrong"] == .array([.string("/"), .string("?")]), "\(result.stdout)")
        #expect(scans.first?["typed"] == .string(url))
        #expect(scans.allSatisfy { ($0["typingMs"]?.doubleValue ?? -1) > 0 })
        let xml = (try? String(contentsOfFile: junit, encoding: .utf8)) ?? ""
        #expect(xml.contains(#"failures="1""#) && xml.contains(#"name="scan 3""#), "\(xml)")
        #expect(try JUnitSchema.validate(junit).count == 2)
    }

    /// A bench's region: the common countries of western Europe and the US (the whole catalog is the default, and
    /// the in-process test above tries it for 24 countries).
    static let region = "us,gb,de,at,fr,be,ch,it,es,pt,nl,se,fi,no,dk,pl"

    @Test(arguments: [("de", "de", true), ("fr", "fr", false), ("ch(fr)", "ch", false), ("us", "us", false)])
    func theScannersCountryIsNamed(_ country: String, _ expected: String, _ wholeCatalog: Bool) throws {
        let events = Script.typing(LayoutCalibration.text, try XKBLayouts.layout(country))
        let (result, json) = try calibrate(events, layouts: wholeCatalog ? nil : Self.region)
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(json?["layout"] == .string(expected), "\(result.stdout)")
        #expect(json?["config"] == .string(#""hid": {"layout": "\#(expected)"}"#))
    }

    @Test func aScannerNoLayoutExplainsIsSaidSoWithExit1() throws {
        // A US scanner whose `/` key sends `-`: no layout types the code that way.
        let events = Script.typing(LayoutCalibration.text, try XKBLayouts.layout("us")).map { event -> InputEvent in
            var copy = event
            if copy.type == Evdev.EV_KEY, copy.code == Evdev.KEY_SLASH { copy.code = Evdev.KEY_MINUS }
            return copy
        }
        let (result, json) = try calibrate(events, layouts: Self.region)
        #expect(result.status == 1)
        #expect(json?["layout"] == .null)
        guard case .array(let unmatched)? = json?["closest"]?["unmatched"] else {
            Issue.record("no closest: \(result.stdout)")
            return
        }
        #expect(unmatched.contains(.string("/")))
    }
}
