import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// The real `plings-bridge run` reading serial scanners that umockdev emulates (udev properties, hot-plug, and a
/// pty behind `/dev/ttyACM0`), driven by `Tests/Rigs/serial/serial_driver.py`; what reached the spool is read back
/// with `spool list --json`.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/umockdev-wrapper")))
struct SerialUmockdevTests {
    let binary = Products.path("plings-bridge")
    static let url1 = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJ&p=4.2.3.3.6"
    static let url2 = "https://s.plings.io/?t=q&i=9ZpXw3&p=4.2.3.3.7&cp=K7"
    /// The scanner of acm0/acm1.umockdev (USB 0c2e:0b6a); the modem of modem.umockdev is 1199:9071.
    static let matchScanner = #"{"vendor":"0c2e","product":"0b6a"}"#
    static let name = "Honeywell_Test_Scanner_SN0042"

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func hex(_ text: String) -> String { hex(Array(text.utf8)) }

    /// Runs the driver with `steps` (JSON objects) around `run`, with the `serial` section `serial` and every other
    /// source off; returns the driver's report and the spool's records.
    func drive(_ steps: [String], serial: String, command: [String] = ["run"]) throws -> (
        report: JSONValue, records: [JSONValue]
    ) {
        let dir = TemporaryDirectory("serial-umockdev")
        defer { dir.remove() }
        let config = dir.file("config.json")
        let script = dir.file("script.json")
        let spool = dir.file("spool.sqlite")
        _ = FileManager.default.createFile(
            atPath: config,
            contents: Data(
                #"{"serial":\#(serial),"hid":{"enabled":false},"nfc":{"enabled":false},"location":{"enabled":false}}"#
                    .utf8))
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

    @Test func codesArriveByteExactWhateverTheReadBoundaries() throws {
        let gs1: [UInt8] = Array("]C1".utf8) + Array("0104012345678901".utf8) + [0x1D] + Array("10ABC".utf8)
        let (report, records) = try drive(
            [
                #"{"plug":"acm0.umockdev"}"#, #"{"plug":"modem.umockdev"}"#, #"{"start":true}"#,
                #"{"wait":"serial scanner attached"}"#,
                // A URL split across two writes, CR LF from a scanner set to CR LF, then a GS1 code with its GS.
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(String(Self.url1.prefix(11))))"}"#, #"{"pause":0.05}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(String(Self.url1.dropFirst(11)) + "\r\n"))"}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(gs1 + [0x0D]))"}"#,
                #"{"wait":"scan accepted"}"#, #"{"wait":"read unrecognized"}"#,
            ], serial: #"{"match":[\#(Self.matchScanner)]}"#)
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.map { $0["raw"]?.stringValue } == [Self.url1, String(decoding: gs1, as: UTF8.self)])
        #expect(records.allSatisfy { $0["source"]?["kind"]?.stringValue == "serial" })
        #expect(records.allSatisfy { $0["source"]?["device"]?.stringValue == Self.name })
        #expect(records.first?["input"]?["identifier"]?.stringValue == "4kyQCd5tMDjJVWJ")
        // The modem's port is not opened: no rule names it.
        let log = report["stderr"]?.stringValue ?? ""
        #expect(!log.contains("ttyACM7"), "\(log)")
        #expect(log.contains("devnode=/dev/ttyACM0"))
    }

    @Test func aScannerPluggedLaterUnpluggedAndReplugged() throws {
        let (report, records) = try drive(
            [
                #"{"start":true}"#, #"{"wait":"ready: waiting for reads"}"#,
                #"{"plug":"acm0.umockdev","event":true}"#, #"{"wait":"serial scanner attached"}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(Self.url1 + "\r"))"}"#, #"{"wait":"scan accepted"}"#,
                #"{"unplug":"acm0.umockdev"}"#, #"{"wait":"serial scanner detached"}"#,
                #"{"plug":"acm1.umockdev","event":true}"#, #"{"wait":"serial scanner attached","count":2}"#,
                #"{"write":"/dev/ttyACM1","hex":"\#(Self.hex(Self.url2 + "\r"))"}"#,
                #"{"wait":"scan accepted","count":2}"#,
            ], serial: #"{"match":[\#(Self.matchScanner)]}"#)
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.map { $0["raw"]?.stringValue } == [Self.url1, Self.url2])
    }

    @Test func withoutASuffixTheGapEndsACodeAndAnOverlongOneIsRefusedInOneLine() throws {
        let (report, records) = try drive(
            [
                #"{"plug":"acm0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"serial scanner attached"}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(Self.url1))"}"#, #"{"wait":"scan accepted"}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(String(repeating: "9", count: 100)))"}"#,
                #"{"wait":"scan discarded"}"#,
            ], serial: #"{"match":[{"devnode":"/dev/ttyACM*"}],"suffix":"none","interByteTimeout":0.1,"maxLength":80}"#)
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.map { $0["raw"]?.stringValue } == [Self.url1])
        let discard = (report["stderr"]?.stringValue ?? "").split(separator: "\n").first {
            $0.contains("scan discarded")
        }
        #expect(discard?.contains("longer than serial.maxLength (80 bytes)") == true, "\(discard ?? "")")
    }

    @Test func scannersListsTheUSBSerialPortsAndTheRuleThatNamesEach() throws {
        let (report, _) = try drive(
            [#"{"plug":"acm0.umockdev"}"#, #"{"plug":"modem.umockdev"}"#, #"{"start":true}"#, #"{"exit":true}"#],
            serial: #"{"match":[\#(Self.matchScanner)]}"#, command: ["scanners", "--json"])
        #expect(report["ok"] == .bool(true), "\(report)")
        guard case .array(let stdout)? = report["stdout"], let line = stdout.first?.stringValue,
            case .array(let listed) = try JSONParser.parse(line)
        else {
            Issue.record("no JSON array on stdout: \(report)")
            return
        }
        let ports = listed.filter { $0["transport"]?.stringValue == "serial" }
        #expect(ports.map { $0["devnode"]?.stringValue } == ["/dev/ttyACM0", "/dev/ttyACM7"])
        let scanner = try #require(ports.first)
        #expect(scanner["matched"] == .bool(true) && scanner["reason"] == .string("serial.match[0]"))
        #expect(scanner["vendor"] == .string("0c2e") && scanner["model"] == .string("0b6a"))
        #expect(scanner["serial"] == .string("SN0042") && scanner["stableName"] == .string(Self.name))
        let modem = try #require(ports.last)
        #expect(modem["matched"] == .bool(false) && modem["reason"] == .string("no serial.match rule names it"))
    }

    /// `scanners --watch` reads every scanner source the configuration enables, as `run` makes them (issue 38,
    /// item 5): a serial scanner's code is printed, and nothing is committed without `--pipeline`.
    @Test func scannersWatchReadsASerialScanner() throws {
        let (report, records) = try drive(
            [
                #"{"plug":"acm0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"serial scanner attached"}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(Self.url1 + "\r"))"}"#, #"{"exit":true}"#,
            ], serial: #"{"match":[\#(Self.matchScanner)]}"#,
            command: ["scanners", "--watch", "--count", "1", "--duration", "20"])
        #expect(report["ok"] == .bool(true), "\(report)")
        guard case .array(let stdout)? = report["stdout"] else {
            Issue.record("no stdout: \(report)")
            return
        }
        let lines = try stdout.map { try JSONParser.parse($0.stringValue ?? "") }
        #expect(lines.map { $0["raw"] } == [.string(Self.url1)], "\(report)")
        #expect(lines.first?["device"] == .string(Self.name))
        #expect(records.isEmpty)
    }

    /// Issue 44: the `name` of the `serial.match` rule that matched is the port's name in its reads and in
    /// `scanners`.
    @Test func aSerialScannerCarriesTheNameItsRuleGives() throws {
        let named = #"{"match":[{"vendor":"0c2e","product":"0b6a","name":"bench-2-serial"}]}"#
        let (report, _) = try drive(
            [
                #"{"plug":"acm0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"serial scanner attached"}"#,
                #"{"write":"/dev/ttyACM0","hex":"\#(Self.hex(Self.url1 + "\r"))"}"#, #"{"exit":true}"#,
            ], serial: named, command: ["scanners", "--watch", "--count", "1", "--duration", "20"])
        guard case .array(let stdout)? = report["stdout"] else {
            Issue.record("no stdout: \(report)")
            return
        }
        let lines = try stdout.map { try JSONParser.parse($0.stringValue ?? "") }
        #expect(lines.first?["device"] == .string("bench-2-serial"), "\(report)")
        let (listing, _) = try drive(
            [#"{"plug":"acm0.umockdev"}"#, #"{"start":true}"#, #"{"exit":true}"#], serial: named,
            command: ["scanners", "--json"])
        guard case .array(let out)? = listing["stdout"], let line = out.first?.stringValue,
            case .array(let listed) = try JSONParser.parse(line)
        else {
            Issue.record("no JSON array on stdout: \(listing)")
            return
        }
        let port = listed.first { $0["devnode"]?.stringValue == "/dev/ttyACM0" }
        #expect(port?["stableName"] == .string("bench-2-serial"), "\(listed)")
    }

    @Test func noRuleMeansNoPortAndStatusSaysSo() throws {
        let (report, records) = try drive(
            [#"{"plug":"acm0.umockdev"}"#, #"{"start":true}"#, #"{"wait":"ready: waiting for reads"}"#], serial: "{}")
        #expect(report["ok"] == .bool(true), "\(report)")
        #expect(records.isEmpty)
        #expect((report["stderr"]?.stringValue ?? "").contains("no serial.match rule: no serial port is opened"))
    }
}
