import BridgeCore

/// `hid`: keyboard-wedge barcode scanners (docs/configuration.md, "`hid`").
public struct HIDConfig: ConfigSection {
    public var enabled = true
    public var grab = true
    /// An xkb layout (`de`, `de(nodeadkeys)`; `uk` means `gb`) and optional variant, checked at load.
    public var layout = "us"
    public var variant: String?
    public var suffix: Suffix = .enter
    public var maxLineLength = 4096
    public var interKeyTimeout: Double = 0.5
    public var debounce: Double = 1.5
    public var match: [Match] = []
    /// `hid.passThrough`: which codes are also typed to the desktop on a virtual keyboard (`PassThroughKeyboard`).
    public var passThrough: PassThrough = .none

    public init() {}

    public enum Suffix: String, Sendable, CaseIterable {
        case enter
        case tab
    }

    /// A configured scanner match: every non-nil field must equal the device's value.
    public struct Match: Sendable, Equatable {
        public var vendor: String?
        public var model: String?
        public var serial: String?
        public var path: String?
        public var layout: String?
        public var variant: String?
        /// The operator's name for the scanners this rule matches (`DeviceName`): their reads' `device`.
        public var name: String?

        public init(
            vendor: String? = nil, model: String? = nil, serial: String? = nil, path: String? = nil,
            layout: String? = nil, variant: String? = nil, name: String? = nil
        ) {
            self.name = name
            self.variant = variant
            self.vendor = vendor
            self.model = model
            self.serial = serial
            self.path = path
            self.layout = layout
        }
    }

    // MARK: The section's keys

    public static let name = "hid"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.flag("hid.enabled", \.hid.enabled),
        ConfigLoader.flag("hid.grab", \.hid.grab),
        ConfigLoader.text("hid.layout", \.hid.layout),
        ConfigLoader.optionalText("hid.variant", \.hid.variant),
        ConfigLoader.choice("hid.suffix", \.hid.suffix),
        ConfigLoader.integer("hid.maxLineLength", 1...65_536, \.hid.maxLineLength),
        ConfigLoader.number("hid.interKeyTimeout", 0.01...60, \.hid.interKeyTimeout),
        ConfigLoader.number("hid.debounce", 0...3600, \.hid.debounce),
        ConfigLoader.structured("hid.match", .fileOnly("scanner matches"), \.hid.match, matches),
        ConfigLoader.choice("hid.passThrough", \.hid.passThrough),
    ]

    /// Every keyboard layout named in `hid` must be one xkb-data knows (when HID is on).
    public static func validate(_ config: BridgeConfig) throws(ConfigError) {
        let hid = config.hid
        guard hid.enabled else { return }
        var choices = [("hid.layout", "hid.variant", hid.layout, hid.variant)]
        for (index, rule) in hid.match.enumerated() where rule.layout != nil || rule.variant != nil {
            let (layout, variant) = (rule.layout ?? hid.layout, rule.variant)
            choices.append(("hid.match[\(index)].layout", "hid.match[\(index)].variant", layout, variant))
        }
        for (layoutKey, variantKey, layout, variant) in choices {
            do {
                try XKBLayouts.validate(layout: layout, variant: variant)
            } catch {
                let key = error.isVariant && variant != nil ? variantKey : layoutKey
                throw ConfigError("\(key): \(error.message)")
            }
        }
    }

    /// `hid.match`: `[{"vendor": "05e0", "layout": "se", "name": "bench-2-left"}, ...]`; each rule names at least one
    /// of vendor, model, serial, path.
    static func matches(_ value: JSONValue, origin: String) throws(ConfigError) -> [Match] {
        try ConfigLoader.matchRules(
            value, at: origin, keys: ["vendor", "model", "serial", "path", "layout", "variant", "name"],
            usbIDs: ["vendor", "model"], identifying: ["vendor", "model", "serial", "path"]
        ).map { rule in
            Match(
                vendor: rule["vendor"], model: rule["model"], serial: rule["serial"], path: rule["path"],
                layout: rule["layout"], variant: rule["variant"], name: rule["name"])
        }
    }

    public static func deviceNames(_ config: BridgeConfig) -> [(key: String, name: String)] {
        DeviceName.given(config.hid.match.map(\.name), in: "hid.match")
    }
}

extension BridgeConfig {
    /// The `hid` section.
    public var hid: HIDConfig {
        get { sections[HIDConfig.self] }
        set { sections[HIDConfig.self] = newValue }
    }

    /// The name the section's type had inside `BridgeConfig`.
    public typealias HID = HIDConfig
}
