import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// The real `plings-bridge run` reading a HID POS scanner that umockdev emulates: udev properties and hot-plug,
/// the HID device's `report_descriptor` in sysfs, and a pty behind `/dev/hidraw0` that carries the Scanned Data
/// Reports in and the feedback reports out; driven by `Tests/Rigs/serial/serial_driver.py`. What reached the spool
/// is read back with `spool list --json`. The reports are laid out as the vendors' manuals give them
/// (`HIDPOSScanner`), not by the code under test.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/umockdev-wrapper")))
struct HIDPOSUmockdevTests {
    let binary = Products.path("plings-bridge")
    static let url1 = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJ&p=4.2.3.3.6"
    /// Longer than one report's 56 bytes: it takes two.
    static let url2 = "https://s.plings.io/?t=q&i=9ZpXw3&p=4.2.3.3.7&cp=K7&name=" + String(repeating: "Z", count: 40)
    /// The stable name udev's ID_SERIAL would give (vendor_product_serial from the USB strings of pos0.umockdev).
    static let name = "Honeywell_Test_POS_Scanner_SN0077"

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// The write steps of one code: one step per report, as the scanner sends them.
    static func writes(_ node: String, _ data: [UInt8], aim: String = "]Q1") -> [String] {
        HIDPOSScanner.reports(data, aim: aim).map { #"{"write":"\#(node)","hex":"\#(hex($0))"}"# }
    }

    static func writes(_ node: String, _ text: String, aim: String = "]Q1") -> [String] {
        writes(node, Array(text.utf8), aim: aim)
    }

    /// Runs the driver with `steps` around `command`, with the `hidpos` section `hidpos` and every other source
    /// off; returns the driver's report and the spool's records.
    func drive(_ steps: [String], hidpos: String = "{}", command: [String] = ["run"]) throws -> (
        report: JSONValue, records: [JSONValue]
    ) {
        let dir = TemporaryDirectory("hidpos-umockdev")
        defer { dir.remove() }
        let config = dir.file("config.json")
        let script = dir.file("script.json")
        let spool = dir.file("spool.sqlite")
        let sections = #""hid":{"enabled":false},"nfc":{"enabled":false},"serial":{"enabled":false}"#
        _ = FileManager.default.createFile(
            atPath: config,
            contents: Data(#"{"hidpos":\#(hidpos),\#(sections),"location":{"enabled":false}}"#.utf8))
        _ = FileManager.default.createFile(
            atPath: script, contents: Data(("[" + steps.joined(separator: ",") + "]").utf8))
        let environment = Products.isolatedEnvironment(home: dir.path)
        let result = try ProcessRunner.run(
            "/usr/bin/umockdev-wrapper",
            ["/usr/bin/python3", Products.rig("serial/serial_driver.py"), script, "--", binary] + command + [
                "--config", config, "--spool", spool,
            ],
            environment: environment, timeout: 60)
        let report = try JSONParser.parse(result.stdout.trimmingASCIIWhitespace())
        let list = try ProcessRunner.run(binary, ["spool", "list", "--json", "--spool", spool], timeout: 20)
        let records = try list.stdoutLines.map { try JSONParser.parse($0) }
        return (report, records)
    }

    @Test func theRigDescribesTheScannerOfTheTests() throws {
        let text = try String(contentsOfFile: Products.rig("hidpos/pos0.umockdev"), encoding: .utf8)
        let line = text.split(separator: "\n").first { $0.hasPrefix("H: report_descriptor=") }
        #expect(line?.dropFirst("H: report_descriptor=".count).lowercased() == Self.hex(HIDPOSScanner.descriptor))
    }

    @Test func codesArriveByteExactWithTheirSymbologyAndAnErrorBeepForAForeignCode() throws {
        let gs1: [UInt8] = Array("0104012345678901".utf8) + [0x1D] + Array("10ABC".utf8)
        let (report, records) = try drive(
            [#"{"plug":"../hidpos/pos0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"HID POS scanner attached"}"#]
                + Self.writes("/dev/hidraw0", Self.url1) + [#"{"wait":"scan accepted"}"#]
                + Self.writes("/dev/hidraw0", Self.url2) + [#"{"wait":"scan accepted","count":2}"#]
                + Self.writes("/dev/hidraw0", gs1, aim: "]C1") + [
                    #"{"wait":"read unrecognized"}"#,
                    // Not a Plings code: the Trigger Report's Sound Error Beep bit.
                    #"{"expect":"/dev/hidraw0","hex":"\#(Self.hex(HIDPOSScanner.errorBeep))"}"#,
                ])
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.map { $0["raw"]?.stringValue } == [Self.url1, Self.url2, String(decoding: gs1, as: UTF8.self)])
        #expect(records.map { $0["symbology"]?.stringValue } == ["]Q1", "]Q1", "]C1"])
        #expect(records.allSatisfy { $0["source"]?["kind"]?.stringValue == "hidpos" })
        #expect(records.allSatisfy { $0["source"]?["device"]?.stringValue == Self.name })
        #expect(records[1]["input"]?["identifier"]?.stringValue == "9ZpXw3")
        // The API input stays the phone app's: no symbology in it.
        #expect(records[0]["input"]?["symbology"] == nil)
        // The vendor interface (usage page 0xFF8C) of the same scanner is not opened.
        let log = report["stderr"]?.stringValue ?? ""
        #expect(!log.contains("/dev/hidraw1"), "\(log)")
    }

    @Test func unpluggedMidCodeAndRepluggedLosesNothingThatWasComplete() throws {
        let reports = HIDPOSScanner.reports(Array(Self.url2.utf8))
        let (report, records) = try drive(
            [
                #"{"start":true}"#, #"{"wait":"ready: waiting for reads"}"#,
                #"{"plug":"../hidpos/pos0.umockdev","event":true}"#, #"{"wait":"HID POS scanner attached"}"#,
            ] + Self.writes("/dev/hidraw0", Self.url1) + [
                // Half of the next code, then the cable is pulled.
                #"{"write":"/dev/hidraw0","hex":"\#(Self.hex(reports[0]))"}"#, #"{"wait":"scan accepted"}"#,
                #"{"pause":0.2}"#, #"{"unplug":"../hidpos/pos0.umockdev"}"#, #"{"wait":"HID POS scanner detached"}"#,
                #"{"plug":"../hidpos/pos2.umockdev","event":true}"#, #"{"wait":"HID POS scanner attached","count":2}"#,
            ] + Self.writes("/dev/hidraw2", Self.url2) + [#"{"wait":"scan accepted","count":2}"#])
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.map { $0["raw"]?.stringValue } == [Self.url1, Self.url2])
    }

    /// Issue 44: the `name` of the `hidpos.match` rule that matched is the scanner's name in its records and in
    /// `scanners`.
    @Test func aHIDPOSScannerCarriesTheNameItsRuleGives() throws {
        let named = #"{"match":[{"serial":"SN0077","name":"bench-2-pos"}]}"#
        let (report, records) = try drive(
            [#"{"plug":"../hidpos/pos0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"HID POS scanner attached"}"#]
                + Self.writes("/dev/hidraw0", Self.url1) + [#"{"wait":"scan accepted"}"#], hidpos: named)
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.map { $0["source"]?["device"]?.stringValue } == ["bench-2-pos"])
        let (listing, _) = try drive(
            [#"{"plug":"../hidpos/pos0.umockdev"}"#, #"{"start":true}"#, #"{"exit":true}"#], hidpos: named,
            command: ["scanners", "--json"])
        guard case .array(let stdout)? = listing["stdout"], let line = stdout.first?.stringValue,
            case .array(let listed) = try JSONParser.parse(line)
        else {
            Issue.record("no JSON array on stdout: \(listing)")
            return
        }
        let pos = listed.first { $0["devnode"]?.stringValue == "/dev/hidraw0" }
        #expect(pos?["stableName"] == .string("bench-2-pos"), "\(listed)")
    }

    @Test func scannersTellsThePOSInterfaceFromTheVendorOneByDescriptor() throws {
        let (report, _) = try drive(
            [#"{"plug":"../hidpos/pos0.umockdev"}"#, #"{"start":true}"#, #"{"exit":true}"#],
            command: ["scanners", "--json"])
        #expect(report["ok"] == .bool(true), "\(report)")
        guard case .array(let stdout)? = report["stdout"], let line = stdout.first?.stringValue,
            case .array(let listed) = try JSONParser.parse(line)
        else {
            Issue.record("no JSON array on stdout: \(report)")
            return
        }
        let nodes = listed.filter { $0["transport"]?.stringValue == "hidpos" }
        #expect(nodes.map { $0["devnode"]?.stringValue } == ["/dev/hidraw0", "/dev/hidraw1"])
        let pos = try #require(nodes.first)
        #expect(pos["matched"] == .bool(true) && pos["stableName"] == .string(Self.name))
        #expect(
            pos["vendor"] == .string("0c2e") && pos["model"] == .string("0b87") && pos["serial"] == .string("SN0077"))
        let vendor = try #require(nodes.last)
        #expect(vendor["matched"] == .bool(false))
        #expect(vendor["reason"]?.stringValue?.contains("usage page 0xFF8C") == true, "\(vendor)")
    }

    @Test func aMatchRuleThatNamesAnotherScannerLeavesThisOneAlone() throws {
        let (report, records) = try drive(
            [#"{"plug":"../hidpos/pos0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"ready: waiting for reads"}"#]
                + Self.writes("/dev/hidraw0", Self.url1) + [#"{"pause":0.3}"#],
            hidpos: #"{"match":[{"vendor":"05e0"}]}"#)
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.isEmpty)
        #expect((report["stderr"]?.stringValue ?? "").contains("no HID POS scanner found"))
    }

    /// `doctor`'s hidpos check, from the same udev and sysfs the service sees.
    func doctorCheck(_ rig: String) throws -> JSONValue? {
        let (report, _) = try drive(
            [#"{"plug":"../hidpos/\#(rig)"}"#, #"{"start":true}"#, #"{"exit":"any"}"#],
            command: ["doctor", "--json", "--no-nfc", "--no-hid", "--no-serial", "--no-location"])
        guard case .array(let stdout)? = report["stdout"], let line = stdout.first?.stringValue,
            case .array(let checks) = try JSONParser.parse(line)
        else {
            Issue.record("no JSON array on stdout: \(report)")
            return nil
        }
        return checks.first { $0["name"]?.stringValue == "hidpos" }
    }

    @Test func doctorNamesTheScannerAndWarnsWhenItIsAlsoAKeyboard() throws {
        let single = try #require(try doctorCheck("pos0.umockdev"))
        #expect(single["status"] == .string("ok"), "\(single)")
        #expect(single["message"]?.stringValue?.contains("/dev/hidraw0 (\(Self.name))") == true, "\(single)")
        // The same scanner with a keyboard interface as well (an event node with ID_INPUT_KEYBOARD on the same USB
        // device): its codes would be read twice.
        let dual = try #require(try doctorCheck("dual.umockdev"))
        #expect(dual["status"] == .string("warn"), "\(dual)")
        #expect(dual["message"]?.stringValue?.contains("also a keyboard") == true, "\(dual)")
    }
}
