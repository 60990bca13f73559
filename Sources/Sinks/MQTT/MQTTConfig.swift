import BridgeCore
import Foundation

/// `mqtt`: publishing scans and device health to an MQTT broker (docs/configuration.md, "`mqtt`"). No `url` means
/// no MQTT. The section's keys, its checks across keys, and its resolution into `MQTTSettings` (credentials read
/// from their files).
public struct MQTTConfig: ConfigSection {
    /// `mqtts://host[:8883]`, or `mqtt://host[:1883]` (plain TCP: to another host only with `allowInsecure`).
    public var url: String?
    public var allowInsecure = false
    public var site = "default"
    /// nil: a stable id of the box, from /etc/machine-id (hashed).
    public var deviceId: String?
    public var topicPrefix = "plings"
    public var usernameFile: String?
    public var passwordFile: String?
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var keepalive = 60
    public var maxInflight = 20
    /// Home Assistant MQTT discovery: a tag scanner per source and a connectivity sensor, under `homeAssistantPrefix`.
    public var homeAssistant = false
    public var homeAssistantPrefix = "homeassistant"

    public init() {}

    public static let name = "mqtt"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.optionalText("mqtt.url", \.mqtt.url),
        ConfigLoader.flag("mqtt.allowInsecure", \.mqtt.allowInsecure),
        ConfigLoader.text("mqtt.site", \.mqtt.site) { topicProblem($0, allowLevels: false) },
        ConfigLoader.optionalText("mqtt.deviceId", \.mqtt.deviceId) { topicProblem($0, allowLevels: false) },
        ConfigLoader.text("mqtt.topicPrefix", \.mqtt.topicPrefix) { topicProblem($0, allowLevels: true) },
        ConfigLoader.optionalText("mqtt.usernameFile", \.mqtt.usernameFile),
        ConfigLoader.optionalText("mqtt.passwordFile", \.mqtt.passwordFile),
        ConfigLoader.optionalText("mqtt.caFile", \.mqtt.caFile),
        ConfigLoader.optionalText("mqtt.certFile", \.mqtt.certFile),
        ConfigLoader.optionalText("mqtt.keyFile", \.mqtt.keyFile),
        ConfigLoader.integer("mqtt.keepalive", 5...3600, \.mqtt.keepalive),
        ConfigLoader.integer("mqtt.maxInflight", 1...65_535, \.mqtt.maxInflight),
        ConfigLoader.flag("mqtt.homeAssistant", \.mqtt.homeAssistant),
        ConfigLoader.text("mqtt.homeAssistantPrefix", \.mqtt.homeAssistantPrefix) {
            topicProblem($0, allowLevels: true)
        },
    ]

    public static func validate(_ config: BridgeConfig) throws(ConfigError) { try validate(config.mqtt) }

    /// Checks that need several `mqtt` keys at once: the URL's scheme and host, plain TCP to another host only with
    /// `allowInsecure` (a broker on this box needs no flag: nothing crosses the network), TLS files only with
    /// `mqtts://`, a key with its certificate.
    static func validate(_ mqtt: MQTTConfig) throws(ConfigError) {
        guard let url = mqtt.url else { return }
        let endpoint = try parse(url)
        if !endpoint.tls {
            guard mqtt.allowInsecure || LoopbackHost.contains(endpoint.host) else {
                throw ConfigError(
                    "mqtt.url uses mqtt:// (plain TCP) to '\(endpoint.host.prefix(64))': credentials and scans would "
                        + "cross the network unencrypted; use mqtts://, or set mqtt.allowInsecure for a broker on a "
                        + "trusted LAN")
            }
            if mqtt.caFile != nil || mqtt.certFile != nil || mqtt.keyFile != nil {
                throw ConfigError("mqtt.caFile/certFile/keyFile need an mqtts:// url")
            }
        }
        if (mqtt.certFile == nil) != (mqtt.keyFile == nil) {
            throw ConfigError("mqtt.certFile and mqtt.keyFile go together (a client certificate needs its key)")
        }
        if mqtt.passwordFile != nil, mqtt.usernameFile == nil {
            throw ConfigError("mqtt.passwordFile needs mqtt.usernameFile")
        }
    }

    /// `mqtt://host[:port]` or `mqtts://host[:port]` (default ports 1883 and 8883), no credentials or path.
    static func parse(_ url: String) throws(ConfigError) -> (host: String, port: Int, tls: Bool) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { throw ConfigError("mqtt.url '\(url.prefix(100))' is not a valid URL") }
        if components.user != nil || components.password != nil {
            throw ConfigError("mqtt.url must not carry credentials; use mqtt.usernameFile and mqtt.passwordFile")
        }
        guard components.path.isEmpty || components.path == "/", components.query == nil else {
            throw ConfigError("mqtt.url takes no path or query (topics come from mqtt.topicPrefix, site, deviceId)")
        }
        let tls: Bool
        switch scheme {
        case "mqtts": tls = true
        case "mqtt": tls = false
        default: throw ConfigError("mqtt.url scheme '\(scheme)' is not mqtt or mqtts")
        }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return (bare, components.port ?? (tls ? 8883 : 1883), tls)
    }

    /// The box's default device id: SHA-256 of /etc/machine-id (never the id itself, which systemd asks not to
    /// expose), first 16 hex digits. Stable across reboots and reinstalls of plings-bridge.
    public static func defaultDeviceID(machineIDPath: String = "/etc/machine-id") throws(ConfigError) -> String {
        guard let data = FileManager.default.contents(atPath: machineIDPath),
            case let id = String(decoding: data, as: UTF8.self).trimmingASCIIWhitespace(), !id.isEmpty
        else {
            throw ConfigError("mqtt.deviceId is not set and \(machineIDPath) is unreadable: set mqtt.deviceId")
        }
        return String(MQTTClient.sha256Hex("plings-bridge:" + id).prefix(16))
    }

    /// The sink's settings, or nil when no `mqtt.url` is configured.
    public static func settings(_ config: BridgeConfig) throws(ConfigError) -> MQTTSettings? {
        let mqtt = config.mqtt
        guard let url = mqtt.url else { return nil }
        let endpoint = try parse(url)
        let deviceID: String
        if let configured = mqtt.deviceId { deviceID = configured } else { deviceID = try defaultDeviceID() }
        let username = try mqtt.usernameFile.map { (f: String) throws(ConfigError) in try read(f, "mqtt.usernameFile") }
        let password = try mqtt.passwordFile.map { (f: String) throws(ConfigError) in try read(f, "mqtt.passwordFile") }
        return MQTTSettings(
            host: endpoint.host, port: endpoint.port, tls: endpoint.tls, caFile: mqtt.caFile, certFile: mqtt.certFile,
            keyFile: mqtt.keyFile, username: username, password: password,
            topicBase: "\(mqtt.topicPrefix)/\(mqtt.site)/\(deviceID)", deviceID: deviceID, keepalive: mqtt.keepalive,
            maxInflight: mqtt.maxInflight, homeAssistantPrefix: mqtt.homeAssistant ? mqtt.homeAssistantPrefix : nil)
    }

    /// A credential file's first line (a trailing newline from `echo secret > file` is not part of it).
    private static func read(_ path: String, _ key: String) throws(ConfigError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError("\(key): cannot read \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingASCIIWhitespace()
        guard !text.isEmpty else { throw ConfigError("\(key): \(path) is empty") }
        return text
    }

    /// Why `text` cannot be part of an MQTT topic name (MQTT 3.1.1/5.0 section 4.7: no wildcards, no NUL; our own
    /// levels must not be empty or split further unless `allowLevels`), or nil.
    static func topicProblem(_ text: String, allowLevels: Bool) -> String? {
        if text.contains("+") || text.contains("#") || text.contains("\u{0}") {
            return "'\(text.prefix(64))' contains a wildcard (+ or #) or NUL, not allowed in an MQTT topic"
        }
        if !allowLevels, text.contains("/") { return "'\(text.prefix(64))' must be one topic level (no '/')" }
        if text.hasPrefix("/") || text.hasSuffix("/") || text.contains("//") {
            return "'\(text.prefix(64))' must not start or end with '/' or contain an empty level"
        }
        return nil
    }
}

extension BridgeConfig {
    /// The `mqtt` section.
    public var mqtt: MQTTConfig {
        get { sections[MQTTConfig.self] }
        set { sections[MQTTConfig.self] = newValue }
    }
}
