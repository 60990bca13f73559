import BridgeCore
import Testing
import Udev

@testable import Serial

/// The `serial` section as docs/configuration.md states it.
struct SerialConfigTests {
    func load(_ json: String) throws(ConfigError) -> BridgeConfig {
        var loader = ConfigLoader(sections: [SerialConfig.self])
        try loader.applyFile(Array(json.utf8), origin: "test.json")
        try loader.validateSections()
        return loader.config
    }

    @Test func defaultsOpenNoPort() throws {
        let serial = try load("{}").serial
        #expect(serial.enabled && serial.match.isEmpty)
        #expect(serial.suffix == .cr && serial.prefix == nil && serial.baud == 9600 && serial.maxLength == 4096)
    }

    @Test func matchesTakeHexIdsAndPatterns() throws {
        let serial = try load(
            #"{"serial":{"match":[{"vendor":"0C2E","product":"0b6a"},{"devnode":"/dev/ttyUSB*","serial":"SN00??"}],"#
                + #""prefix":"stx","suffix":"etx","baud":115200}}"#
        ).serial
        #expect(serial.match[0] == SerialConfig.Match(vendor: "0c2e", product: "0b6a"))
        let port = SerialPortInfo(
            DeviceIdentity(devnode: "/dev/ttyUSB3", vendor: "0403", product: "6001", serial: "SN0042"))
        #expect(!serial.match[0].matches(port))
        #expect(serial.match[1].matches(port))
        #expect(!serial.match[1].matches(SerialPortInfo(DeviceIdentity(devnode: "/dev/ttyACM0", serial: "SN0042"))))
        #expect(serial.prefix == .stx && serial.suffix == .etx && serial.baud == 115_200)
    }

    @Test func mistakesNameTheKey() {
        let cases: [(String, String)] = [
            (#"{"serial":{"baud":1234}}"#, "serial.baud is 1234"),
            (#"{"serial":{"match":[{}]}}"#, "a match needs at least one of"),
            (#"{"serial":{"match":[{"vendor":"honeywell"}]}}"#, "vendor: expected 4 hex digits"),
            (#"{"serial":{"match":[{"port":"x"}]}}"#, "unknown key 'port'"),
            (#"{"serial":{"suffix":"crlf2"}}"#, "config key 'serial.suffix'"),
            (#"{"serial":{"prefix":"soh"}}"#, #"expected "stx" or null"#),
        ]
        for (json, needle) in cases {
            do {
                _ = try load(json)
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.message.contains(needle), "\(json): \(error.message)")
            }
        }
    }
}
