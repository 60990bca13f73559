import BridgeCore

/// Home Assistant's MQTT discovery messages for this device (home-assistant.io, "MQTT tag scanner" and "MQTT
/// binary sensor"): one tag scanner per read source, each turning a recognized scan of its source on the `/scans`
/// topic into a "tag scanned" event whose tag id is the Plings identifier, and a connectivity sensor fed by the
/// retained `/status` message. All retained, so Home Assistant finds them after its own restart. Pure: the sink
/// publishes what `messages` returns, and an empty retained payload removes a topic no longer listed.
public struct HomeAssistantDiscovery: Sendable, Equatable {
    public var prefix: String
    public var deviceID: String
    public var topicBase: String
    public var version: String

    public init(prefix: String, deviceID: String, topicBase: String, version: String) {
        self.prefix = prefix
        self.deviceID = deviceID
        self.topicBase = topicBase
        self.version = version
    }

    /// The `device` block that ties every entity to one device in Home Assistant's registry.
    var device: JSONValue {
        .object([
            ("identifiers", .array([.string("plings-bridge-\(deviceID)")])),
            ("name", .string("plings-bridge \(deviceID)")),
            ("model", .string("plings-bridge")), ("manufacturer", .string("Plings")), ("sw_version", .string(version)),
        ])
    }

    /// Topic -> payload for the read sources `sources` (their kinds, as `status` names them).
    public func messages(sources: [String]) -> [(topic: String, payload: String)] {
        var messages: [(String, String)] = []
        for source in sources.sorted() where Self.isTopicLevel(source) {
            // An empty rendering is no scan (Home Assistant ignores it): a scan of another source, or an
            // unrecognized read (those go to `/unrecognized`, and have no identifier).
            let template =
                "{% if value_json.source.kind == '\(source)' and value_json.input %}"
                + "{{ value_json.input.identifier }}{% endif %}"
            messages.append(
                (
                    "\(prefix)/tag/\(deviceID)_\(source)/config",
                    JSONValue.object([
                        ("topic", .string("\(topicBase)/scans")), ("value_template", .string(template)),
                        ("qos", .integer(1)),
                        ("device", device),
                    ]).encoded()
                ))
        }
        messages.append(
            (
                "\(prefix)/binary_sensor/\(deviceID)/online/config",
                JSONValue.object([
                    ("name", .string("Online")), ("unique_id", .string("plings-bridge-\(deviceID)-online")),
                    ("state_topic", .string("\(topicBase)/status")),
                    ("value_template", .string("{{ 'ON' if value_json.online else 'OFF' }}")),
                    ("device_class", .string("connectivity")), ("entity_category", .string("diagnostic")),
                    ("qos", .integer(1)), ("device", device),
                ]).encoded()
            ))
        return messages
    }

    /// A source kind is one topic level of letters, digits, `_` and `-` (Home Assistant's object ids).
    static func isTopicLevel(_ text: String) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
    }
}
