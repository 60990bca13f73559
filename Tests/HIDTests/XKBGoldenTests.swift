import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import Testing

@testable import HID

/// Every layout against xkb-data itself: `Tests/Rigs/hid/xkb_golden.py` types each key of the main block at the
/// plain, Shift, AltGr and Shift+AltGr levels through libxkbcommon's per-event API (and dead keys through the
/// compose API, letters under Caps Lock, Ctrl chords) and says what xkb gives. The same key presses go through
/// the real reader loop (pipe -> `HIDSource` -> decoder -> `Read`), one line per case, and must come out as xkb
/// said. The product's tables are never consulted for the expected text.
@Suite(.serialized)
struct XKBGoldenTests {
    /// The layouts issue 17 names, plus variants scanners' country lists need.
    static let layouts = [
        "us", "gb", "se", "no", "dk", "fi", "de", "ch", "fr", "be", "it", "es", "pt", "nl", "pl", "cz", "us(intl)",
        "gb(extd)", "de(nodeadkeys)", "ch(fr)",
    ]

    struct Case {
        /// Key presses: each a list of codes pressed in order and released in reverse.
        var strokes: [[UInt16]]
        var text: String
        var kind: String
    }

    struct Golden {
        var layout: String
        var cases: [Case]
    }

    /// Runs the generator once for all layouts.
    static let goldens: [Golden] = {
        guard
            let result = try? ProcessRunner.run(
                "/usr/bin/python3", [Products.rig("hid/xkb_golden.py")] + layouts, timeout: 120),
            result.status == 0
        else { return [] }
        return result.stdout.split(separator: "\n").compactMap { line in
            guard let json = try? JSONParser.parse(Array(line.utf8)), let layout = json["layout"]?.stringValue else {
                return nil
            }
            var cases: [Case] = []
            for kind in ["chars", "dead", "caps", "control"] {
                for item in json[kind]?.arrayValue ?? [] {
                    guard let pair = item.arrayValue, pair.count == 2, let text = pair[1].stringValue,
                        let raw = pair[0].arrayValue
                    else { continue }
                    // "chars", "caps" and "control" give one stroke; "dead" gives a list of strokes.
                    let nested = raw.first?.arrayValue != nil
                    let strokes = (nested ? raw : [pair[0]]).map { stroke in
                        (stroke.arrayValue ?? []).compactMap { $0.doubleValue.map { UInt16($0) } }
                    }
                    cases.append(Case(strokes: strokes, text: text, kind: kind))
                }
            }
            return Golden(layout: layout, cases: cases)
        }
    }()

    /// The events for one case: each stroke one press report and one release report; Caps Lock cases tap Caps
    /// Lock, type the key and tap Caps Lock again; then Enter.
    static func events(for golden: Case, start: Int64) -> [InputEvent] {
        var time = start
        var events: [InputEvent] = []
        func report(_ codes: [UInt16], _ value: Int32) {
            for code in codes {
                events.append(InputEvent(microseconds: time, type: Evdev.EV_KEY, code: code, value: value))
            }
            events.append(InputEvent(microseconds: time, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0))
            time += 2_000
        }
        var strokes = golden.strokes
        if golden.kind == "caps", let codes = strokes.first, codes.count == 2 {
            strokes = [[codes[0]], [codes[1]], [codes[0]]]
        }
        for stroke in strokes + [[Evdev.KEY_ENTER]] {
            report(stroke, 1)
            report(stroke.reversed(), 0)
        }
        return events
    }

    @Test func generatorCoversEveryLayout() {
        #expect(Self.goldens.map(\.layout) == Self.layouts)
        for golden in Self.goldens {
            // At least the printable ASCII characters every Latin layout has (95 on us).
            #expect(golden.cases.filter { $0.kind == "chars" }.count >= 90, "\(golden.layout)")
        }
    }

    @Test(arguments: layouts)
    func layoutMatchesXKB(_ layout: String) {
        guard let golden = Self.goldens.first(where: { $0.layout == layout }) else {
            Issue.record("no golden data for \(layout) (python3 and libxkbcommon0 are needed)")
            return
        }
        var config = BridgeConfig().hid
        config.layout = layout
        config.maxLineLength = 64
        let collector = ReadCollector()
        let source = HIDSource(config: config, logger: Logger(minimum: .error), udev: false, submit: collector.submit)
        source.start()
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "golden-\(layout)")
        var time: Int64 = 1_000_000
        for item in golden.cases {
            let events = Self.events(for: item, start: time)
            time = (events.last?.time).map { Int64($0 * 1_000_000) + 5_000 } ?? time
            pipe.write(events)
        }
        let reads = collector.wait(for: golden.cases.count, timeout: 20)
        let got = reads.map(\.raw)
        #expect(got.count == golden.cases.count, "\(layout): \(got.count) lines for \(golden.cases.count) cases")
        var wrong: [String] = []
        for (index, item) in golden.cases.enumerated() where index >= got.count || got[index] != item.text {
            let decoded = index < got.count ? got[index].debugDescription : "nothing"
            wrong.append("\(item.kind) \(item.strokes): xkb \(item.text.debugDescription), decoded \(decoded)")
        }
        #expect(wrong.isEmpty, "\(layout): \(wrong.count) of \(golden.cases.count) wrong: \(wrong.prefix(12))")
        let counts = ["chars", "dead", "caps", "control"].map { kind in
            "\(golden.cases.filter { $0.kind == kind }.count) \(kind)"
        }
        print("golden \(layout): \(counts.joined(separator: ", ")); wrong \(wrong.count)")
    }
}
