import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// The real `plings-bridge` binary under Debian's umockdev: fake sysfs devices from `Tests/Rigs/hid`, evemu
/// event streams generated here from text + layout (realistic 2 ms hold / 3 ms gap timing), LD_PRELOAD'ed
/// libudev and /dev. Hot-plug and a busy grab go through `umockdev_driver.py` (UMockdev.Testbed).
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/umockdev-run")))
struct UmockdevTests {
    let binary = Products.path("plings-bridge")
    static let zebra3 = Products.rig("hid/zebra-event3.umockdev")
    static let zebra4 = Products.rig("hid/zebra-event4.umockdev")
    static let keyboard5 = Products.rig("hid/keyboard-event5.umockdev")
    static let honeywell6 = Products.rig("hid/honeywell-event6.umockdev")
    static let url1 = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJ&p=4.2.3.3.6"
    static let url2 = "https://s.plings.io/?t=q&i=9ZpXw3&p=4.2.3.3.7&cp=K7"

    func environment(_ dir: TemporaryDirectory) -> [String: String] {
        Products.isolatedEnvironment(home: dir.path)
    }

    /// Writes `events` per devnode as evemu files and `config` as JSON; returns the umockdev-run arguments.
    func rig(
        _ dir: TemporaryDirectory, devices: [String], events: [String: [InputEvent]] = [:]
    ) -> [String] {
        var args: [String] = []
        for device in devices { args += ["-d", device] }
        for (devnode, list) in events.sorted(by: { $0.key < $1.key }) {
            let file = dir.file(URL(fileURLWithPath: devnode).lastPathComponent + ".events")
            _ = FileManager.default.createFile(atPath: file, contents: Data(EventScript.evemuText(list).utf8))
            args += ["-e", "\(devnode)=\(file)"]
        }
        return args
    }

    func config(_ dir: TemporaryDirectory, _ json: String) -> [String] {
        let path = dir.file("config.json")
        _ = FileManager.default.createFile(atPath: path, contents: Data(json.utf8))
        return ["--config", path]
    }

    func umockdev(_ rigArgs: [String], _ command: [String], _ dir: TemporaryDirectory) throws -> ProcessResult {
        try ProcessRunner.run(
            "/usr/bin/umockdev-run", rigArgs + ["--", binary] + command, environment: environment(dir), timeout: 30)
    }

    /// `scanners --watch` until `count` lines (bounded by 15 s); returns the parsed lines.
    func watch(
        _ dir: TemporaryDirectory, devices: [String], events: [String: [InputEvent]], count: Int,
        config json: String = "{}", extra: [String] = []
    ) throws -> (lines: [JSONValue], result: ProcessResult) {
        let result = try umockdev(
            rig(dir, devices: devices, events: events),
            ["scanners", "--watch", "--count", String(count), "--duration", "15"] + config(dir, json) + extra, dir)
        let lines = try result.stdoutLines.map { try JSONParser.parse($0) }
        return (lines, result)
    }

    static func concat(_ parts: [[InputEvent]]) -> [InputEvent] {
        parts.flatMap { $0 }
    }

    // MARK: - scanners --json

    @Test func scannersJSONReportsMatchesNamesAndGrabs() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let result = try umockdev(
            rig(dir, devices: [Self.zebra3, Self.zebra4, Self.keyboard5, Self.honeywell6]),
            ["scanners", "--json"]
                + config(dir, #"{"hid": {"match": [{"vendor": "046D", "model": "c31c", "layout": "se"}]}}"#), dir)
        #expect(result.status == 0, "\(result.stderr)")
        let array = try #require(try JSONParser.parse(result.stdout.trimmingASCIIWhitespace()).arrayValue)
        #expect(array.count == 4)
        let byNode = Dictionary(
            uniqueKeysWithValues: array.compactMap { item in
                item["devnode"]?.stringValue.map { ($0, item) }
            })
        let zebra = try #require(byNode["/dev/input/event3"])
        for key in [
            "devnode", "name", "vendor", "model", "serial", "path", "matched", "reason", "openable", "grabbable",
        ] {
            #expect(zebra[key] != nil, "missing \(key)")
        }
        #expect(zebra["vendor"] == .string("05e0") && zebra["model"] == .string("1200"))
        #expect(zebra["name"] == .string("Symbol Bar Code Scanner"))
        #expect(zebra["serial"] == .string("Symbol_Bar_Code_Scanner_DS2208"))
        #expect(zebra["matched"] == .bool(true) && zebra["reason"] == .string("udev rule (PLINGS_SCANNER=1)"))
        #expect(zebra["openable"] == .bool(true) && zebra["grabbable"] == .bool(true))
        // Two identical scanners share a serial: both are named by where they are plugged in.
        #expect(zebra["stableName"] == .string("pci-0000:00:14.0-usb-0:2:1.0"))
        #expect(byNode["/dev/input/event4"]?["stableName"] == .string("pci-0000:00:14.0-usb-0:3:1.0"))
        let honeywell = try #require(byNode["/dev/input/event6"])
        #expect(honeywell["stableName"] == .string("Honeywell_Imaging_Scanner_19123B4567"))
        #expect(honeywell["vendor"] == .string("0c2e") && honeywell["model"] == .string("0b61"))
        let keyboard = try #require(byNode["/dev/input/event5"])
        #expect(keyboard["matched"] == .bool(true))
        #expect(keyboard["reason"] == .string("hid.match[0] (vendor=046d model=c31c)"))
        #expect(keyboard["layout"] == .string("se"))
    }

    @Test func plainKeyboardIsListedButNotMatchedNorGrabbed() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let result = try umockdev(rig(dir, devices: [Self.keyboard5]), ["scanners", "--json"], dir)
        #expect(result.status == 0, "\(result.stderr)")
        let array = try #require(try JSONParser.parse(result.stdout.trimmingASCIIWhitespace()).arrayValue)
        #expect(array.count == 1)
        #expect(array.first?["matched"] == .bool(false))
        #expect(array.first?["reason"]?.stringValue?.contains("046d:c31c") == true)
        #expect(array.first?["openable"] == .bool(true) && array.first?["grabbable"] == .bool(false))
        let human = try umockdev(rig(dir, devices: [Self.keyboard5]), ["scanners"], dir)
        #expect(human.status == 0 && human.stdout.contains("ignored: not a known scanner"))
    }

    @Test func noDevicesIsAnEmptyArrayAndExitZero() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let mocked = try umockdev([], ["scanners", "--json"], dir)
        #expect(mocked.status == 0, "\(mocked.stderr)")
        #expect(mocked.stdout.trimmingASCIIWhitespace() == "[]")
        // The real machine has no /dev/input at all.
        let real = try ProcessRunner.run(binary, ["scanners", "--json"], environment: environment(dir), timeout: 30)
        #expect(real.status == 0 && real.stdout.trimmingASCIIWhitespace() == "[]")
    }

    // MARK: - Reading

    /// Issue 44: a scanner carries the name its operator gave it in `hid.match` (its reads and `scanners` say it),
    /// and two rules of any sections giving one name are refused before anything starts.
    @Test func aScannerCarriesTheNameItsRuleGives() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let named = #"{"hid": {"match": [{"serial": "DS2208", "name": "bench-2-left"}]}}"#
        let events = Script.typing(Self.url1, .us, modifiers: .sameReport)
        let (lines, result) = try watch(
            dir, devices: [Self.zebra3, Self.honeywell6], events: ["/dev/input/event3": events], count: 1,
            config: named)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["raw"] } == [.string(Self.url1)])
        #expect(lines.first?["device"] == .string("bench-2-left"))
        let listing = try umockdev(
            rig(dir, devices: [Self.zebra3, Self.honeywell6]), ["scanners", "--json"] + config(dir, named), dir)
        let scanners = try JSONParser.parse(listing.stdout.trimmingASCIIWhitespace())
        guard case .array(let items) = scanners else {
            Issue.record("scanners --json is not an array: \(listing.stdout)")
            return
        }
        let byNode = Dictionary(items.compactMap { item in item["devnode"]?.stringValue.map { ($0, item) } }) { a, _ in
            a
        }
        #expect(byNode["/dev/input/event3"]?["stableName"] == .string("bench-2-left"))
        // The other scanner, which the rule does not name, keeps its stable name (udev's rule tagged it).
        #expect(byNode["/dev/input/event6"]?["stableName"]?.stringValue?.isEmpty == false)
        #expect(byNode["/dev/input/event6"]?["stableName"] != .string("bench-2-left"))

        let twice =
            #"{"hid": {"match": [{"serial": "DS2208", "name": "gate-3"}]}, "nfc": {"names": [{"reader": "ACS*", "name": "gate-3"}]}}"#
        let check = try ProcessRunner.run(
            binary, ["config", "check"] + config(dir, twice), environment: environment(dir), timeout: 30)
        #expect(check.status == 2)
        #expect(
            check.stderr.contains("nfc.names[0].name and hid.match[0].name both name a device 'gate-3'"),
            "\(check.stderr)")
        #expect(check.stderr.split(separator: "\n").count == 1, "one plain line: \(check.stderr)")
    }

    @Test func usLayoutCombinedShiftEnterSuffix() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let events = Script.typing(Self.url1, .us, modifiers: .sameReport)
        let (lines, result) = try watch(dir, devices: [Self.zebra3], events: ["/dev/input/event3": events], count: 1)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["raw"] } == [.string(Self.url1)])
        #expect(lines.first?["device"] == .string("Symbol_Bar_Code_Scanner_DS2208"))
        #expect(result.stderr.contains("grabbed=true"))
    }

    @Test func seLayoutSeparateShiftWithAltGrCharacters() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let text = "Plings-ÅÄÖ-åäö@€£$|{[]}\\~?"
        let events = Script.typing(text, .se, modifiers: .separateReport)
        #expect(!events.isEmpty)
        let (lines, result) = try watch(
            dir, devices: [Self.honeywell6], events: ["/dev/input/event6": events], count: 1,
            config: #"{"hid": {"layout": "se"}}"#)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["raw"] } == [.string(text)])
        #expect(result.stderr.contains("layout=se"))
    }

    @Test func deLayoutAltGrAsControlAltFromAMatchRuleLayout() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let text = "Zürich@Straße{1}€ yz"
        let events = Script.typing(text, .de, modifiers: .sameReport, altGr: .controlAlt)
        #expect(!events.isEmpty)
        let (lines, result) = try watch(
            dir, devices: [Self.honeywell6], events: ["/dev/input/event6": events], count: 1,
            config: #"{"hid": {"layout": "us", "match": [{"serial": "19123B4567", "layout": "de"}]}}"#)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["raw"] } == [.string(text)])
    }

    /// Three layouts end to end (umockdev node -> real binary -> JSON lines), with key presses and expected
    /// text from xkb-data (`xkb_golden.py`), not from the product: every printable character, dead keys, Ctrl.
    @Test(arguments: ["fr", "ch(fr)", "cz"])
    func xkbGoldenThroughTheRig(_ layout: String) throws {
        guard let golden = XKBGoldenTests.goldens.first(where: { $0.layout == layout }) else {
            Issue.record("no golden data for \(layout)")
            return
        }
        let cases =
            golden.cases.filter { $0.kind == "chars" || $0.kind == "control" }
            + golden.cases.filter { $0.kind == "dead" }.prefix(40)
        var events: [InputEvent] = []
        var time: Int64 = 1_000_000
        for item in cases {
            let part = XKBGoldenTests.events(for: item, start: time)
            time = (part.last?.time).map { Int64($0 * 1_000_000) + 3_000 } ?? time
            events += part
        }
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let (lines, result) = try watch(
            dir, devices: [Self.honeywell6], events: ["/dev/input/event6": events], count: cases.count,
            config: #"{"hid": {"layout": "\#(layout)"}}"#)
        #expect(result.status == 0, "\(result.stderr)")
        let got = lines.map { $0["raw"]?.stringValue ?? "" }
        let wrong = zip(cases, got).filter { $0.0.text != $0.1 }.map { "\($0.0.strokes): \($0.0.text) != \($0.1)" }
        #expect(got.count == cases.count && wrong.isEmpty, "\(layout): \(wrong.prefix(10))")
        #expect(result.stderr.contains("layout=\(layout)"))
    }

    @Test func tabSuffixEndsTheLineAndEnterDoesNot() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        // One scan: an Enter in the middle (ignored with suffix tab), the tail 3 ms later (umockdev replays the
        // evemu timestamps, so a longer gap would trip the 0.5 s inter-key timeout).
        let head = Script.typing("4006381333931", .us, suffix: .enter, start: 1_000_000)
        let resume = (head.last.map { $0.seconds * 1_000_000 + $0.microseconds } ?? 0) + 3_000
        let events = Self.concat([head, Script.typing("-tail", .us, suffix: .tab, start: resume)])
        let (lines, result) = try watch(
            dir, devices: [Self.zebra3], events: ["/dev/input/event3": events], count: 1,
            config: #"{"hid": {"suffix": "tab"}}"#)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["raw"] } == [.string("4006381333931-tail")])
    }

    @Test func synDroppedAndOverlongLinesAreDiscardedAndReadingGoesOn() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let broken = Script.typing(Self.url1, .us, start: 1_000_000)
        var dropped = InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_DROPPED, value: 0)
        dropped.seconds = broken[broken.count / 2].seconds
        dropped.microseconds = broken[broken.count / 2].microseconds
        let events = Self.concat([
            Array(broken.prefix(broken.count / 2)), [dropped], Array(broken.suffix(from: broken.count / 2)),
            Script.typing(String(repeating: "9", count: 80), .us, start: 1_400_000),
            Script.typing("ok-after", .us, start: 1_900_000),
        ])
        let (lines, result) = try watch(
            dir, devices: [Self.zebra3], events: ["/dev/input/event3": events], count: 1,
            config: #"{"hid": {"maxLineLength": 64}}"#)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["raw"] } == [.string("ok-after")])
        #expect(result.stderr.contains("SYN_DROPPED"))
        #expect(result.stderr.contains("line longer than hid.maxLineLength"))
    }

    @Test func twoScannersAtOnceNeverInterleave() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let (lines, result) = try watch(
            dir, devices: [Self.zebra3, Self.honeywell6],
            events: [
                "/dev/input/event3": Script.typing(Self.url1, .us),
                "/dev/input/event6": Script.typing(Self.url2, .us, modifiers: .separateReport),
            ], count: 2)
        #expect(result.status == 0, "\(result.stderr)")
        let got = Set(
            lines.compactMap { line in
                line["device"]?.stringValue.flatMap { device in line["raw"]?.stringValue.map { "\(device)=\($0)" } }
            })
        #expect(
            got == [
                "Symbol_Bar_Code_Scanner_DS2208=\(Self.url1)", "Honeywell_Imaging_Scanner_19123B4567=\(Self.url2)",
            ])
    }

    @Test func duplicateInsideTheDebounceWindowIsCommittedOnce() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let spool = dir.file("spool.sqlite")
        let events = Self.concat([
            Script.typing(Self.url1, .us, start: 1_000_000),
            Script.typing(Self.url1, .us, start: 1_500_000),
            Script.typing("4006381333931", .us, start: 2_000_000),
        ])
        let (lines, result) = try watch(
            dir, devices: [Self.zebra3], events: ["/dev/input/event3": events], count: 3,
            config: #"{"hid": {"debounce": 5}}"#, extra: ["--pipeline", "--spool", spool])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.map { $0["outcome"] } == [.string("accepted"), .string("debounced"), .string("accepted")])
        #expect(lines.map { $0["state"] } == [.string("pending"), nil, .string("unrecognized")])
        let list = try ProcessRunner.run(
            binary, ["spool", "list", "--json", "--spool", spool], environment: environment(dir))
        #expect(list.status == 0)
        let records = try list.stdoutLines.map { try JSONParser.parse($0) }
        #expect(records.count == 2)
        #expect(records.map { $0["raw"] } == [.string(Self.url1), .string("4006381333931")])
        #expect(records.first?["source"]?["kind"] == .string("hid"))
        #expect(records.first?["source"]?["device"] == .string("Symbol_Bar_Code_Scanner_DS2208"))
    }

    // MARK: - Hot-plug and grab (UMockdev.Testbed driver)

    func driver(_ mode: String, _ args: [String], _ command: [String], _ dir: TemporaryDirectory) throws -> JSONValue {
        let result = try ProcessRunner.run(
            "/usr/bin/umockdev-wrapper",
            ["/usr/bin/python3", Products.rig("hid/umockdev_driver.py"), mode] + args + ["--", binary] + command,
            environment: environment(dir), timeout: 60)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        return try JSONParser.parse(result.stdout.trimmingASCIIWhitespace())
    }

    func evemuFile(_ dir: TemporaryDirectory, _ name: String, _ events: [InputEvent]) -> String {
        let path = dir.file(name)
        _ = FileManager.default.createFile(atPath: path, contents: Data(EventScript.evemuText(events).utf8))
        return path
    }

    @Test func hotPlugAddRemoveReplugIsGrabbedAgain() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let first = evemuFile(dir, "first.events", Script.typing("scan-1", .us))
        let second = evemuFile(dir, "second.events", Script.typing("scan-2", .us))
        let report = try driver(
            "hotplug", [Self.zebra3, first, Self.zebra4, second], ["scanners", "--watch", "--duration", "30"], dir)
        #expect(report["ok"] == .bool(true), "\(report)")
        let reads = try (report["stdout"]?.arrayValue ?? []).compactMap {
            try JSONParser.parse($0.stringValue ?? "")["raw"]
        }
        #expect(reads == [.string("scan-1"), .string("scan-2")])
        let stderr = report["stderr"]?.stringValue ?? ""
        #expect(stderr.contains("no scanners found: waiting for one to be plugged in"))
        #expect(stderr.contains("devnode=/dev/input/event3 why=unplugged"))
        #expect(stderr.components(separatedBy: "grabbed=true").count - 1 == 2)
        #expect(
            stderr.contains("msg=\"scanner attached\" device=Symbol_Bar_Code_Scanner_DS2208 devnode=/dev/input/event4"))
    }

    @Test func grabHeldByAnotherProcessIsSaidClearly() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        let events = evemuFile(dir, "busy.events", Script.typing("still-read", .us))
        let report = try driver(
            "ebusy", [Self.zebra3, events], ["scanners", "--watch", "--count", "1", "--duration", "15"], dir)
        let stderr = report["stderr"]?.stringValue ?? ""
        #expect(stderr.contains("scanner is grabbed by another process"))
        #expect(stderr.contains("errno \(EBUSY)"))
        #expect(stderr.contains("grabbed=false"))
        let listing = try driver("ebusy", [Self.zebra3, events], ["scanners", "--json"], dir)
        let line = listing["stdout"]?.arrayValue?.first?.stringValue ?? ""
        let array = try JSONParser.parse(line).arrayValue ?? []
        #expect(array.first?["openable"] == .bool(true) && array.first?["grabbable"] == .bool(false))
        #expect(array.first?["problem"]?.stringValue?.contains("grabbed by another process") == true)
    }
    @Test func grabWaitsUntilTheHeldKeyIsReleased() throws {
        let dir = TemporaryDirectory("hid-umockdev")
        defer { dir.remove() }
        // The scanner was opened while KEY_A was down: its release comes first, then a scan.
        let release = [
            InputEvent(seconds: 1, microseconds: 0, type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 0),
            InputEvent(seconds: 1, microseconds: 0, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0),
        ]
        let events = evemuFile(dir, "held.events", release + Script.typing("after-release", .us, start: 1_005_000))
        let report = try driver(
            "heldkey", [Self.zebra3, events], ["scanners", "--watch", "--count", "1", "--duration", "15"], dir)
        let lines = report["stdout"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(lines.count == 2)
        #expect(try lines.first.map { try JSONParser.parse($0)["raw"] } == .string("after-release"))
        #expect(try lines.last.map { try JSONParser.parse($0)["grabs"] } == .integer(1))
        let stderr = report["stderr"]?.stringValue ?? ""
        let waiting = try #require(stderr.range(of: "scanner has a key held: grabbing once it is released"))
        let grabbed = try #require(stderr.range(of: "scanner grabbed: the held key was released"))
        #expect(waiting.lowerBound < grabbed.lowerBound)
        #expect(!stderr.contains("cannot read the scanner's held keys"))
    }
}
