import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// Home Assistant through MQTT discovery (issue 25), on a real Mosquitto broker, checked field by field against
/// Home Assistant's documented schemas ("MQTT tag scanner": `topic` required, `value_template`, `device` required
/// with `identifiers` or `connections`; "MQTT binary sensor": `state_topic`, `device_class` from the documented
/// list, payloads `ON`/`OFF` by default) and with the templates rendered by Jinja2 (python3-jinja2, the engine Home
/// Assistant's templates are) against the messages the bridge really published.
@Suite(.serialized)
struct HomeAssistantDiscoveryTests {
    let mqtt = MQTTTests()

    /// The tag scanner keys and device keys Home Assistant documents (home-assistant.io/integrations/tag.mqtt).
    static let tagKeys: Set<String> = ["topic", "value_template", "device", "qos"]
    static let deviceKeys: Set<String> = [
        "configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id", "name",
        "serial_number", "suggested_area", "sw_version", "via_device",
    ]

    /// Renders `template` with `value_json` = each payload, as Home Assistant's MQTT value templates do.
    func render(_ template: String, _ payloads: [String]) throws -> [String] {
        let program = """
            import json, sys, jinja2
            job = json.load(sys.stdin)
            template = jinja2.Environment().from_string(job["template"])
            print(json.dumps([template.render(value_json=json.loads(p), value=p).strip() for p in job["payloads"]]))
            """
        let job = JSONValue.object([
            ("template", .string(template)), ("payloads", .array(payloads.map(JSONValue.string))),
        ]).encoded()
        let result = try ProcessRunner.run("/usr/bin/python3", ["-c", program], stdin: job)
        guard case .array(let rendered) = try JSONParser.parse(Array(result.stdout.utf8)) else {
            throw RigError("jinja2: \(result.stderr)")
        }
        return rendered.compactMap(\.stringValue)
    }

    @Test func discoveryGivesATagScannerPerSourceAndAnOnlineSensor() throws {
        let broker = try MosquittoRig()
        let s = try mqtt.setup(mqtt: mqtt.plain(broker) + #", "homeAssistant": true"#)
        defer { s.dir.remove() }
        let subscriber = try MQTTSubscriber(port: broker.port, topic: "#")
        defer { subscriber.stop() }
        let bridge = try mqtt.startBridge(s)
        defer { bridge.stop() }
        // Online: the sink is registered, so every scan from now on is queued for the broker.
        #expect(
            subscriber.waitFor(timeout: 15) { t, p in t == s.base + "/status" && p.contains(#""online":true"#) } != nil)
        #expect(try mqtt.run(s, ["scan", "https://s.plings.io/?t=n&i=Tag7k&p=2", "--source", "nfc"]).status == 0)
        #expect(try mqtt.run(s, ["scan", "https://s.plings.io/?t=q&i=Qr9x&p=2", "--source", "hid"]).status == 0)
        #expect(subscriber.waitFor(timeout: 15) { t, p in t == s.base + "/scans" && p.contains("Qr9x") } != nil)
        let messages = subscriber.messages
        let discovery = Dictionary(
            messages.filter { $0.topic.hasPrefix("homeassistant/") }.map { ($0.topic, $0.payload) },
            uniquingKeysWith: { _, last in last })
        let scans = messages.filter { $0.topic == s.base + "/scans" }.map(\.payload)
        #expect(scans.count == 2, "\(messages.map(\.topic))")

        // One tag scanner per read source the service has, each firing only for its own source's recognized scans.
        for source in ["nfc", "hid", "hidpos", "serial"] {
            let topic = "homeassistant/tag/gate7_\(source)/config"
            guard let payload = discovery[topic], case .object(let members) = try JSONParser.parse(Array(payload.utf8))
            else {
                Issue.record("no \(topic): \(discovery.keys.sorted())")
                continue
            }
            let config = JSONValue.object(members)
            #expect(Set(members.map(\.0)).isSubset(of: Self.tagKeys), "\(members.map(\.0))")
            #expect(config["topic"] == .string(s.base + "/scans"))
            guard case .object(let device)? = config["device"], case .array(let ids)? = config["device"]?["identifiers"]
            else {
                Issue.record("\(topic): no device identifiers")
                continue
            }
            #expect(!ids.isEmpty && Set(device.map(\.0)).isSubset(of: Self.deviceKeys))
            #expect(config["device"]?["sw_version"] == .string(BridgeVersion.current))
            let rendered = try render(config["value_template"]?.stringValue ?? "", scans)
            let expected = scans.map { scan in
                scan.contains(#""kind":"\#(source)""#) ? (scan.contains("Tag7k") ? "Tag7k" : "Qr9x") : ""
            }
            #expect(rendered == expected, "\(source): \(rendered)")
        }
        // An unrecognized read never becomes a tag.
        let odd = #"{"id":"x","source":{"kind":"nfc","device":"r","uid":null},"raw":"x","input":null}"#
        #expect(
            try render(
                JSONParser.parse(Array(discovery["homeassistant/tag/gate7_nfc/config", default: "{}"].utf8))[
                    "value_template"]?.stringValue ?? "", [odd]) == [""])

        // The connectivity sensor reads the retained status message.
        let sensorTopic = "homeassistant/binary_sensor/gate7/online/config"
        let sensor = try JSONParser.parse(Array(discovery[sensorTopic, default: "{}"].utf8))
        #expect(sensor["state_topic"] == .string(s.base + "/status"))
        #expect(sensor["device_class"] == .string("connectivity"))
        #expect(sensor["unique_id"] == .string("plings-bridge-gate7-online"))
        #expect(
            sensor["device"]?["identifiers"]
                == discovery.values.first.flatMap { try? JSONParser.parse(Array($0.utf8)) }?["device"]?["identifiers"])
        let status = messages.last { $0.topic == s.base + "/status" }?.payload ?? "{}"
        #expect(
            try render(sensor["value_template"]?.stringValue ?? "", [status, #"{"online":false}"#]) == ["ON", "OFF"])
    }

    /// Home Assistant's Mosquitto add-on listens on plain 1883: `mqtt://` to a broker on this box needs no flag, to
    /// another host it needs `allowInsecure` and says why.
    @Test func plainMQTTIsFreeOnLoopbackAndAskedForElsewhere() throws {
        let s = try mqtt.setup(mqtt: #""url": "mqtt://127.0.0.1:1883""#)
        defer { s.dir.remove() }
        #expect(try mqtt.run(s, ["config", "check"]).status == 0)
        for (url, flag, status) in [
            ("mqtt://192.0.2.10", "", Int32(2)), ("mqtt://192.0.2.10", #", "allowInsecure": true"#, 0),
            ("mqtt://[::1]:1883", "", 0),
        ] {
            try """
            {"mqtt": {"url": "\(url)"\(flag), "deviceId": "gate7"}, "nfc": {"enabled": false}, "hid": {"enabled": false}}
            """.write(toFile: s.config, atomically: true, encoding: .utf8)
            let result = try mqtt.run(s, ["config", "check"])
            #expect(result.status == status, "\(url)\(flag): \(result.stderr)")
            if status == 2 {
                #expect(result.stderr.contains("mqtt.url uses mqtt:// (plain TCP) to '192.0.2.10'"))
                #expect(result.stderr.contains("mqtt.allowInsecure"))
            }
        }
    }
}
