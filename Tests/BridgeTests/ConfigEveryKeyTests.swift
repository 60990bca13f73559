import Bridge
import PlingsAPI
import Foundation
import HID
import HIDPOS
import HTTPInterface
import MQTT
import NFC
import Serial
import Testing
import Webhook

@testable import BridgeCore

/// Every configuration key, set to a value other than its default, arrives in `BridgeConfig`, from the file and
/// (where the key has a text form) from its `PLINGS_BRIDGE_*` variable. The expected fields are written here by
/// hand from docs/configuration.md, not taken from the loader's table, so a key the table parses but stores in
/// the wrong field (or nowhere) fails, and so does a key added to the table without a line here.
struct ConfigEveryKeyTests {
    /// A key's non-default value as JSON, as environment text (nil: config file only), and how to see it arrived.
    struct Case: Sendable {
        let path: String
        let json: String
        let text: String?
        let arrived: @Sendable (BridgeConfig) -> Bool
    }

    static let cases: [Case] = [
        Case(path: "api.url", json: #""https://api.example.org/graphql""#, text: "https://api.example.org/graphql") {
            $0.api.url == "https://api.example.org/graphql"
        },
        Case(path: "api.tokenFile", json: #""/etc/t""#, text: "/etc/t") { $0.api.tokenFile == "/etc/t" },
        Case(path: "api.document", json: #""mutation M { m }""#, text: "mutation M { m }") {
            $0.api.document == "mutation M { m }"
        },
        Case(path: "api.timeout", json: "7.5", text: "7.5") { $0.api.timeout == 7.5 },
        Case(path: "api.concurrency", json: "9", text: "9") { $0.api.concurrency == 9 },
        Case(path: "api.batchSize", json: "7", text: "7") { $0.api.batchSize == 7 },
        Case(path: "api.allowInsecureHTTP", json: "true", text: "yes") { $0.api.allowInsecureHTTP },
        Case(path: "spool.path", json: #""/tmp/s.sqlite""#, text: "/tmp/s.sqlite") { $0.spool.path == "/tmp/s.sqlite" },
        Case(path: "spool.synchronous", json: #""normal""#, text: "normal") { $0.spool.synchronous == .normal },
        Case(path: "spool.deliveredRetention", json: "3600", text: "3600") { $0.spool.deliveredRetention == 3600 },
        Case(path: "nfc.enabled", json: "false", text: "off") { !$0.nfc.enabled },
        Case(path: "nfc.readers", json: #"["ACS*","Identiv*"]"#, text: "ACS*, Identiv*") {
            $0.nfc.readers == ["ACS*", "Identiv*"]
        },
        Case(path: "nfc.debounce", json: "0.25", text: "0.25") { $0.nfc.debounce == 0.25 },
        Case(path: "nfc.names", json: #"[{"path":"pci-0000:00:14.0-usb-0:1","name":"gate-3-in"}]"#, text: nil) {
            $0.nfc.names == [NFCConfig.NameRule(path: "pci-0000:00:14.0-usb-0:1", name: "gate-3-in")]
        },
        Case(path: "nfc.profiles", json: #"[{"reader":"ACR122","profile":"plain"}]"#, text: nil) {
            $0.nfc.profiles == [ReaderProfile.Rule(reader: "ACR122", profile: .plain)]
        },
        Case(path: "nfc.feedback.enabled", json: "false", text: "false") { !$0.nfc.feedback.enabled },
        Case(path: "nfc.feedback.accepted", json: #""red 3x200""#, text: "red 3x200") {
            $0.nfc.feedback.accepted == FeedbackPattern(led: .red, beeps: 3, milliseconds: 200)
        },
        Case(path: "nfc.feedback.unrecognized", json: #""green 1x200""#, text: "green 1x200") {
            $0.nfc.feedback.unrecognized == FeedbackPattern(led: .green, beeps: 1, milliseconds: 200)
        },
        Case(path: "nfc.feedback.failed", json: #""orange 2x300""#, text: "orange 2x300") {
            $0.nfc.feedback.failed == FeedbackPattern(led: .orange, beeps: 2, milliseconds: 300)
        },
        Case(path: "nfc.silenceDetectBeep", json: "true", text: "1") { $0.nfc.silenceDetectBeep },
        Case(path: "nfc.checkOriginality", json: "true", text: "yes") { $0.nfc.checkOriginality },
        Case(path: "hid.enabled", json: "false", text: "0") { !$0.hid.enabled },
        Case(path: "hid.grab", json: "false", text: "no") { !$0.hid.grab },
        Case(path: "hid.layout", json: #""de""#, text: "de") { $0.hid.layout == "de" },
        Case(path: "hid.variant", json: #""nodeadkeys""#, text: "nodeadkeys") { $0.hid.variant == "nodeadkeys" },
        Case(path: "hid.suffix", json: #""tab""#, text: "tab") { $0.hid.suffix == .tab },
        Case(path: "hid.maxLineLength", json: "128", text: "128") { $0.hid.maxLineLength == 128 },
        Case(path: "hid.interKeyTimeout", json: "0.2", text: "0.2") { $0.hid.interKeyTimeout == 0.2 },
        Case(path: "hid.debounce", json: "4", text: "4") { $0.hid.debounce == 4 },
        Case(path: "hid.passThrough", json: #""unrecognized""#, text: "unrecognized") {
            $0.hid.passThrough == .unrecognized
        },
        Case(path: "hid.match", json: #"[{"vendor":"05E0","layout":"se","name":"bench-2-left"}]"#, text: nil) {
            $0.hid.match == [BridgeConfig.HID.Match(vendor: "05e0", layout: "se", name: "bench-2-left")]
        },
        Case(path: "hidpos.enabled", json: "false", text: "no") { !$0.hidpos.enabled },
        Case(path: "hidpos.match", json: #"[{"vendor":"0C2E","serial":"SN00*"}]"#, text: nil) {
            $0.hidpos.match == [HIDPOSConfig.Match(vendor: "0c2e", serial: "SN00*")]
        },
        Case(path: "hidpos.feedback", json: #""all""#, text: "all") { $0.hidpos.feedback == .all },
        Case(path: "hidpos.debounce", json: "3", text: "3") { $0.hidpos.debounce == 3 },
        Case(path: "serial.enabled", json: "false", text: "no") { !$0.serial.enabled },
        Case(path: "serial.match", json: #"[{"vendor":"0C2E","devnode":"/dev/ttyACM*"}]"#, text: nil) {
            $0.serial.match == [SerialConfig.Match(vendor: "0c2e", devnode: "/dev/ttyACM*")]
        },
        Case(path: "serial.suffix", json: #""crlf""#, text: "crlf") { $0.serial.suffix == .crlf },
        Case(path: "serial.prefix", json: #""stx""#, text: "stx") { $0.serial.prefix == .stx },
        Case(path: "serial.baud", json: "115200", text: "115200") { $0.serial.baud == 115_200 },
        Case(path: "serial.interByteTimeout", json: "0.05", text: "0.05") { $0.serial.interByteTimeout == 0.05 },
        Case(path: "serial.maxLength", json: "256", text: "256") { $0.serial.maxLength == 256 },
        Case(path: "serial.debounce", json: "3", text: "3") { $0.serial.debounce == 3 },
        Case(path: "location.enabled", json: "false", text: "false") { !$0.location.enabled },
        Case(path: "location.gpsd", json: #""[::1]:2948""#, text: "[::1]:2948") { $0.location.gpsd == "[::1]:2948" },
        Case(path: "location.maxFixAge", json: "30", text: "30") { $0.location.maxFixAge == 30 },
        Case(path: "location.minMode", json: "3", text: "3") { $0.location.minMode == 3 },
        Case(path: "location.fixed", json: #"{"latitude":59.3,"longitude":18.1,"accuracy":4}"#, text: "59.3,18.1,4") {
            $0.location.fixed == LocationFix(latitude: 59.3, longitude: 18.1, accuracy: 4)
        },
        Case(path: "location.timeFromGPS", json: "true", text: "true") { $0.location.timeFromGPS },
        Case(path: "metrics.textfile", json: #""/run/m.prom""#, text: "/run/m.prom") {
            $0.metrics.textfile == "/run/m.prom"
        },
        Case(path: "metrics.interval", json: "60", text: "60") { $0.metrics.interval == 60 },
        Case(path: "mqtt.url", json: #""mqtts://broker:8883""#, text: "mqtts://broker:8883") {
            $0.mqtt.url == "mqtts://broker:8883"
        },
        Case(path: "mqtt.allowInsecure", json: "true", text: "true") { $0.mqtt.allowInsecure },
        Case(path: "mqtt.site", json: #""stockholm""#, text: "stockholm") { $0.mqtt.site == "stockholm" },
        Case(path: "mqtt.deviceId", json: #""gate-7""#, text: "gate-7") { $0.mqtt.deviceId == "gate-7" },
        Case(path: "mqtt.topicPrefix", json: #""acme/plings""#, text: "acme/plings") {
            $0.mqtt.topicPrefix == "acme/plings"
        },
        Case(path: "mqtt.usernameFile", json: #""/etc/u""#, text: "/etc/u") { $0.mqtt.usernameFile == "/etc/u" },
        Case(path: "mqtt.passwordFile", json: #""/etc/p""#, text: "/etc/p") { $0.mqtt.passwordFile == "/etc/p" },
        Case(path: "mqtt.caFile", json: #""/etc/ca.pem""#, text: "/etc/ca.pem") { $0.mqtt.caFile == "/etc/ca.pem" },
        Case(path: "mqtt.certFile", json: #""/etc/c.pem""#, text: "/etc/c.pem") { $0.mqtt.certFile == "/etc/c.pem" },
        Case(path: "mqtt.keyFile", json: #""/etc/k.pem""#, text: "/etc/k.pem") { $0.mqtt.keyFile == "/etc/k.pem" },
        Case(path: "mqtt.keepalive", json: "30", text: "30") { $0.mqtt.keepalive == 30 },
        Case(path: "mqtt.maxInflight", json: "5", text: "5") { $0.mqtt.maxInflight == 5 },
        Case(path: "mqtt.homeAssistant", json: "true", text: "yes") { $0.mqtt.homeAssistant },
        Case(path: "mqtt.homeAssistantPrefix", json: #""ha/disc""#, text: "ha/disc") {
            $0.mqtt.homeAssistantPrefix == "ha/disc"
        },
        Case(path: "webhook.url", json: #""https://hooks.example/scan""#, text: "https://hooks.example/scan") {
            $0.webhook.url == "https://hooks.example/scan"
        },
        Case(path: "webhook.tokenFile", json: #""/etc/wt""#, text: "/etc/wt") { $0.webhook.tokenFile == "/etc/wt" },
        Case(path: "webhook.secretFile", json: #""/etc/ws""#, text: "/etc/ws") { $0.webhook.secretFile == "/etc/ws" },
        Case(path: "webhook.timeout", json: "2.5", text: "2.5") { $0.webhook.timeout == 2.5 },
        Case(path: "webhook.batchSize", json: "20", text: "20") { $0.webhook.batchSize == 20 },
        Case(path: "webhook.allowInsecureHTTP", json: "true", text: "yes") { $0.webhook.allowInsecureHTTP },
        Case(path: "http.listen", json: #""[::1]:9000""#, text: "[::1]:9000") { $0.http.listen == "[::1]:9000" },
        Case(path: "http.tokenFile", json: #""/etc/t""#, text: "/etc/t") { $0.http.tokenFile == "/etc/t" },
        Case(path: "http.certFile", json: #""/etc/c.pem""#, text: "/etc/c.pem") { $0.http.certFile == "/etc/c.pem" },
        Case(path: "http.keyFile", json: #""/etc/k.pem""#, text: "/etc/k.pem") { $0.http.keyFile == "/etc/k.pem" },
        Case(path: "http.maxClients", json: "8", text: "8") { $0.http.maxClients == 8 },
        Case(path: "http.sessionLifetime", json: "3600", text: "3600") { $0.http.sessionLifetime == 3600 },
        Case(path: "hosts", json: #"["Q.Example.org"]"#, text: "Q.Example.org") { $0.hosts == ["q.example.org"] },
    ]

    /// `{"a": {"b": VALUE}}` for path `a.b`.
    static func document(_ path: String, _ json: String) -> String {
        let parts = path.split(separator: ".")
        return parts.reversed().reduce(json) { inner, part in "{\"\(part)\": \(inner)}" }
    }

    @Test func everyKeyOfTheLoaderHasACaseHere() {
        let loaderKeys = Set(ConfigLoader(sections: ConfigRegistry.sections).schema.map(\.path))
        let tested = Set(Self.cases.map(\.path))
        #expect(loaderKeys.subtracting(tested).isEmpty, "keys without a case: \(loaderKeys.subtracting(tested))")
        #expect(tested.subtracting(loaderKeys).isEmpty, "cases for unknown keys: \(tested.subtracting(loaderKeys))")
    }

    @Test(arguments: ConfigEveryKeyTests.cases.map(\.path))
    func keyFromTheFileArrives(_ path: String) throws {
        let entry = try #require(Self.cases.first { $0.path == path })
        #expect(!entry.arrived(BridgeConfig()), "\(path): the test value must differ from the default")
        var loader = ConfigLoader(sections: ConfigRegistry.sections)
        try loader.applyFile(Array(Self.document(path, entry.json).utf8), origin: "every-key.json")
        #expect(entry.arrived(loader.config), "\(path) from the file did not arrive")
    }

    @Test(arguments: ConfigEveryKeyTests.cases.filter { $0.text != nil }.map(\.path))
    func keyFromTheEnvironmentArrives(_ path: String) throws {
        let entry = try #require(Self.cases.first { $0.path == path })
        let text = try #require(entry.text)
        var loader = ConfigLoader(sections: ConfigRegistry.sections)
        try loader.applyEnvironment([ConfigLoader.environmentName(for: path): text])
        #expect(entry.arrived(loader.config), "\(path) from the environment did not arrive")
    }

    /// The keys with a structure of their own are refused from the environment with a reason, not ignored.
    @Test func fileOnlyKeysAreRefusedFromTheEnvironment() {
        for entry in Self.cases where entry.text == nil {
            let name = ConfigLoader.environmentName(for: entry.path)
            var loader = ConfigLoader(sections: ConfigRegistry.sections)
            #expect(throws: ConfigError.self, "\(name) was accepted") {
                try loader.applyEnvironment([name: "x"])
            }
        }
    }
}

/// docs/configuration.md documents exactly the keys the loader knows: a row per key in its section's table
/// (`## \`api\`` ... `| \`timeout\` |`), and `hosts` as a section of its own.
struct ConfigDocumentationTests {
    static func documentedKeys() throws -> Set<String> {
        let docs = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appending(path: "docs/configuration.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        var section: String?
        var keys = Set<String>()
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") {
                // "## `api`: delivery ..." -> api; headings without a key name end the section.
                let parts = line.split(separator: "`")
                section = parts.count >= 2 ? String(parts[1]) : nil
                if section == "hosts" { keys.insert("hosts") }
            } else if let section, line.hasPrefix("| `") {
                // The first cell names one key or several ("`certFile`, `keyFile`").
                let cell = line.split(separator: "|", omittingEmptySubsequences: true).first ?? ""
                for (index, piece) in cell.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                where index % 2 == 1 {
                    keys.insert(section + "." + piece)
                }
            }
        }
        return keys
    }

    @Test func everyKeyIsDocumentedAndEveryDocumentedKeyExists() throws {
        let documented = try Self.documentedKeys()
        let known = Set(ConfigLoader(sections: ConfigRegistry.sections).schema.map(\.path))
        #expect(known.subtracting(documented).isEmpty, "undocumented: \(known.subtracting(documented).sorted())")
        #expect(documented.subtracting(known).isEmpty, "documented, unknown: \(documented.subtracting(known).sorted())")
    }
}
