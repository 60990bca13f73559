import BridgeCore
import Glibc
import Udev

extension SourceKind {
    /// Reads from barcode scanners in HID POS mode (USB HID usage page 0x8C, read through `/dev/hidraw*`).
    public static let hidpos = SourceKind("hidpos")
}

/// `hidpos`: barcode scanners in HID POS mode (docs/configuration.md, "`hidpos`"). Any hidraw device whose report
/// descriptor has a Bar Code Scanner application collection is read, unless `match` narrows that down: the
/// descriptor, not a list of vendors, says what a scanner is.
public struct HIDPOSConfig: ConfigSection {
    public var enabled = true
    /// When non-empty, only scanners one of these rules names are read.
    public var match: [Match] = []
    public var feedback: Feedback = .errors
    public var debounce: Double = 1.5

    public init() {}

    /// What the bridge makes the scanner signal after each code is committed (a scanner beeps on its own when it
    /// decodes; these are the bridge's answers, where the descriptor offers the output).
    public enum Feedback: String, Sendable, CaseIterable {
        /// The error beep when the code is not a Plings URL or could not be committed.
        case errors
        /// Also the good-read beep and LED once a Plings code is on disk (for scanners set to beep on command).
        case all
        /// Nothing: the device node is opened read-only.
        case none
    }

    /// A configured scanner match: every given field must match. `vendor` and `model` are USB ids (4 hex digits,
    /// `model` the product id as in `hid.match`); `serial` and `path` are shell-style patterns on the USB serial
    /// number (or the full `ID_SERIAL`) and udev's `ID_PATH`.
    public struct Match: Sendable, Equatable {
        public var vendor: String?
        public var model: String?
        public var serial: String?
        public var path: String?
        /// The operator's name for the scanners this rule matches (`DeviceName`): their reads' `device`.
        public var name: String?

        public init(
            vendor: String? = nil, model: String? = nil, serial: String? = nil, path: String? = nil,
            name: String? = nil
        ) {
            self.name = name
            self.vendor = vendor
            self.model = model
            self.serial = serial
            self.path = path
        }

        /// True when every given field matches the device's.
        public func matches(_ device: HIDPOSDeviceInfo) -> Bool {
            (vendor.map { $0 == device.vendor } ?? true) && (model.map { $0 == device.product } ?? true)
                && ShellPattern.matches(serial, device.serial, device.fullSerial)
                && ShellPattern.matches(path, device.path)
        }
    }

    // MARK: The section's keys

    public static let name = "hidpos"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.flag("hidpos.enabled", \.hidpos.enabled),
        ConfigLoader.structured("hidpos.match", .fileOnly("scanner matches"), \.hidpos.match, matches),
        ConfigLoader.choice("hidpos.feedback", \.hidpos.feedback),
        ConfigLoader.number("hidpos.debounce", 0...3600, \.hidpos.debounce),
    ]

    /// `hidpos.match`: `[{"vendor": "0c2e", "model": "0b87"}, {"path": "pci-0000:00:14.0-usb-0:2*"}]`.
    static func matches(_ value: JSONValue, origin: String) throws(ConfigError) -> [Match] {
        let keys = ["vendor", "model", "serial", "path"]
        return try ConfigLoader.matchRules(
            value, at: origin, keys: keys + ["name"], usbIDs: ["vendor", "model"], identifying: keys
        )
        .map {
            Match(vendor: $0["vendor"], model: $0["model"], serial: $0["serial"], path: $0["path"], name: $0["name"])
        }
    }

    public static func deviceNames(_ config: BridgeConfig) -> [(key: String, name: String)] {
        DeviceName.given(config.hidpos.match.map(\.name), in: "hidpos.match")
    }
}

extension BridgeConfig {
    /// The `hidpos` section.
    public var hidpos: HIDPOSConfig {
        get { sections[HIDPOSConfig.self] }
        set { sections[HIDPOSConfig.self] = newValue }
    }
}

/// What udev and sysfs say of one hidraw node, for matching, naming and `scanners`: its identity (`model` is the
/// USB product string, or the HID device's name) and where its descriptor is.
public struct HIDPOSDeviceInfo: IdentifiedDevice, Sendable, Equatable {
    public var identity: DeviceIdentity
    /// The HID device's sysfs path, where `report_descriptor` is.
    public var hidSyspath: String?
    /// The USB device's sysfs path (shared by the scanner's other interfaces).
    public var usbSyspath: String?

    public init(_ identity: DeviceIdentity, hidSyspath: String? = nil, usbSyspath: String? = nil) {
        (self.identity, self.hidSyspath, self.usbSyspath) = (identity, hidSyspath, usbSyspath)
    }
}
