import BridgeCore

/// `nfc`: PC/SC readers (docs/configuration.md, "`nfc`").
public struct NFCConfig: ConfigSection {
    public var enabled = true
    /// Shell-style reader name patterns; empty means every reader.
    public var readers: [String] = []
    public var debounce: Double = 2
    /// `nfc.profiles`: reader-name substring -> profile, first match wins; unmatched readers are recognised by name
    /// (`ReaderProfile.recognize`).
    public var profiles: [ReaderProfile.Rule] = []
    /// `nfc.feedback`: beep and LED by outcome, after the commit.
    public var feedback = Feedback()
    /// `nfc.silenceDetectBeep`: turn off the reader's own beep on card detection (writes a reader setting).
    public var silenceDetectBeep = false
    /// `nfc.checkOriginality`: ask NTAG21x tags for NXP's originality signature (one more exchange per read, on
    /// readers with a pass-through) and record whether it is genuine.
    public var checkOriginality = false
    /// `nfc.names`: the operator's names for readers, first matching rule wins (`name(of:identity:)`).
    public var names: [NameRule] = []

    public init() {}

    /// One `nfc.names` rule: every given field must match the reader (shell-style patterns, as `nfc.readers`), and
    /// then its reads carry `name` as their `device`.
    public struct NameRule: Sendable, Equatable {
        /// A pattern on the PC/SC reader name.
        public var reader: String?
        /// A pattern on the USB port (`ReaderIdentity.path`, udev's `ID_PATH`).
        public var path: String?
        /// A pattern on the USB serial number.
        public var serial: String?
        public var name: String

        public init(reader: String? = nil, path: String? = nil, serial: String? = nil, name: String) {
            self.reader = reader
            self.path = path
            self.serial = serial
            self.name = name
        }

        /// True when every given field matches; a `path` or `serial` rule never matches a reader whose port or
        /// serial is unknown.
        public func matches(reader readerName: String, identity: ReaderIdentity?) -> Bool {
            ShellPattern.matches(reader, readerName) && ShellPattern.matches(path, identity?.path)
                && ShellPattern.matches(serial, identity?.serial)
        }
    }

    /// The name reads from `reader` carry: the first `nfc.names` rule that matches it, else its PC/SC name.
    public func name(of reader: String, identity: ReaderIdentity?) -> String {
        names.first { $0.matches(reader: reader, identity: identity) }?.name ?? reader
    }

    /// Feedback patterns by outcome; `enabled` false sends nothing on any reader.
    public struct Feedback: Sendable, Equatable {
        public var enabled = true
        public var accepted = FeedbackPattern(led: .green, beeps: 1, milliseconds: 100)
        public var unrecognized = FeedbackPattern(led: .orange, beeps: 2, milliseconds: 100)
        public var failed = FeedbackPattern(led: .red, beeps: 3, milliseconds: 100)

        /// The pattern for `outcome`.
        public func pattern(for outcome: FeedbackOutcome) -> FeedbackPattern {
            switch outcome {
            case .accepted: return accepted
            case .unrecognized: return unrecognized
            case .failed: return failed
            }
        }
    }

    // MARK: The section's keys

    public static let name = "nfc"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.flag("nfc.enabled", \.nfc.enabled),
        ConfigLoader.list("nfc.readers", \.nfc.readers),
        ConfigLoader.number("nfc.debounce", 0...3600, \.nfc.debounce),
        ConfigLoader.structured("nfc.profiles", .fileOnly("reader profiles"), \.nfc.profiles, readerProfiles),
        ConfigLoader.flag("nfc.feedback.enabled", \.nfc.feedback.enabled),
        ConfigLoader.structured("nfc.feedback.accepted", .textForm, \.nfc.feedback.accepted, feedbackPattern),
        ConfigLoader.structured("nfc.feedback.unrecognized", .textForm, \.nfc.feedback.unrecognized, feedbackPattern),
        ConfigLoader.structured("nfc.feedback.failed", .textForm, \.nfc.feedback.failed, feedbackPattern),
        ConfigLoader.flag("nfc.silenceDetectBeep", \.nfc.silenceDetectBeep),
        ConfigLoader.flag("nfc.checkOriginality", \.nfc.checkOriginality),
        ConfigLoader.structured("nfc.names", .fileOnly("reader names"), \.nfc.names, nameRules),
    ]

    /// `nfc.names`: `[{"path": "pci-0000:00:14.0-usb-0:1", "name": "gate-3-in"}, ...]`; each rule gives a `name` and
    /// at least one of reader, path, serial.
    static func nameRules(_ value: JSONValue, origin: String) throws(ConfigError) -> [NameRule] {
        let identifying = ["reader", "path", "serial"]
        var rules: [NameRule] = []
        for (index, rule) in try ConfigLoader.matchRules(
            value, at: origin, keys: identifying + ["name"], usbIDs: [], identifying: identifying
        ).enumerated() {
            guard let name = rule["name"] else {
                throw ConfigError("\(origin)[\(index)]: a rule needs a name (the reader's name in every record)")
            }
            rules.append(NameRule(reader: rule["reader"], path: rule["path"], serial: rule["serial"], name: name))
        }
        return rules
    }

    public static func deviceNames(_ config: BridgeConfig) -> [(key: String, name: String)] {
        DeviceName.given(config.nfc.names.map(\.name), in: "nfc.names")
    }

    /// `"green 1x100"`, `"off"`: one feedback pattern.
    static func feedbackPattern(_ value: JSONValue, origin: String) throws(ConfigError) -> FeedbackPattern {
        guard let s = value.stringValue else {
            throw ConfigLoader.fail(origin, "a pattern string like \"green 1x100\"", value)
        }
        switch FeedbackPattern.parse(s) {
        case .success(let parsed): return parsed
        case .failure(let error): throw ConfigError("\(origin): \(error.message)")
        }
    }

    /// `nfc.profiles`: `[{"reader": "<substring of the PC/SC name>", "profile": "acr122u"}, ...]`.
    static func readerProfiles(_ value: JSONValue, origin: String) throws(ConfigError) -> [ReaderProfile.Rule] {
        var rules: [ReaderProfile.Rule] = []
        let names = ReaderProfile.allCases.map(\.rawValue).joined(separator: ", ")
        for (where_, members) in try ConfigLoader.objects(value, at: origin) {
            let item = JSONValue.object(members)
            for (key, _) in members where key != "reader" && key != "profile" {
                throw ConfigError("\(where_): unknown key '\(key)'")
            }
            guard let reader = item["reader"]?.stringValue, !reader.isEmpty else {
                throw ConfigError("\(where_).reader: expected a non-empty substring of a reader name")
            }
            guard let text = item["profile"]?.stringValue, let profile = ReaderProfile(rawValue: text) else {
                throw ConfigError("\(where_).profile: expected one of \(names)")
            }
            rules.append(ReaderProfile.Rule(reader: reader, profile: profile))
        }
        return rules
    }
}

extension BridgeConfig {
    /// The `nfc` section.
    public var nfc: NFCConfig {
        get { sections[NFCConfig.self] }
        set { sections[NFCConfig.self] = newValue }
    }

    /// The name the section's type had inside `BridgeConfig`.
    public typealias NFC = NFCConfig
}
