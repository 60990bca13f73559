import BridgeCore
import Glibc
import Udev

extension SourceKind {
    /// Reads from serial barcode scanners (USB CDC-ACM `/dev/ttyACM*`, USB-serial `/dev/ttyUSB*`, RS-232).
    public static let serial = SourceKind("serial")
}

/// `serial`: barcode scanners in "USB COM port" (serial) mode (docs/configuration.md, "`serial`"). No port is
/// opened unless a `match` rule names it: a tty can be a modem, a console or a GPS receiver.
public struct SerialConfig: ConfigSection {
    public var enabled = true
    public var match: [Match] = []
    /// What ends one code (docs/configuration.md lists the bytes).
    public var suffix: SerialFramer.Suffix = .cr
    /// What starts one code, when the scanner is set to send a prefix (`stx`).
    public var prefix: Prefix?
    /// Line speed; ignored by CDC-ACM scanners, which run at USB speed whatever is set.
    public var baud = 9600
    /// With `suffix: none` the gap that ends a code; with a suffix, how long an unfinished code may wait for the
    /// rest before it is discarded.
    public var interByteTimeout: Double = 0.2
    public var maxLength = 4096
    public var debounce: Double = 1.5

    public init() {}

    /// A byte that starts every code.
    public enum Prefix: String, Sendable, CaseIterable {
        case stx

        /// The byte (ASCII STX, start of text).
        public var byte: UInt8 { 0x02 }
    }

    /// A configured port match: every given field must match the device. `vendor` and `product` are USB ids (4 hex
    /// digits); `serial`, `model`, `path` and `devnode` are shell-style patterns (`*`, `?`, `[...]`) on udev's
    /// `ID_SERIAL_SHORT` (else `ID_SERIAL`), `ID_MODEL`, `ID_PATH` and the device node.
    public struct Match: Sendable, Equatable {
        public var vendor: String?
        public var product: String?
        public var serial: String?
        public var model: String?
        public var path: String?
        public var devnode: String?
        /// The operator's name for the ports this rule matches (`DeviceName`): their reads' `device`.
        public var name: String?

        public init(
            vendor: String? = nil, product: String? = nil, serial: String? = nil, model: String? = nil,
            path: String? = nil, devnode: String? = nil, name: String? = nil
        ) {
            self.name = name
            self.vendor = vendor
            self.product = product
            self.serial = serial
            self.model = model
            self.path = path
            self.devnode = devnode
        }

        /// True when every given field matches the port's.
        public func matches(_ port: SerialPortInfo) -> Bool {
            (vendor.map { $0 == port.vendor } ?? true) && (product.map { $0 == port.product } ?? true)
                && ShellPattern.matches(serial, port.serial) && ShellPattern.matches(model, port.model)
                && ShellPattern.matches(path, port.path) && ShellPattern.matches(devnode, port.devnode)
        }
    }

    /// Baud rates termios can set (`cfsetspeed`), the common ones a scanner's manual offers.
    public static let baudRates = [1200, 2400, 4800, 9600, 19_200, 38_400, 57_600, 115_200, 230_400]

    // MARK: The section's keys

    public static let name = "serial"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.flag("serial.enabled", \.serial.enabled),
        ConfigLoader.structured("serial.match", .fileOnly("serial port matches"), \.serial.match, matches),
        ConfigLoader.choice("serial.suffix", \.serial.suffix),
        ConfigLoader.structured("serial.prefix", .optionalString, \.serial.prefix, prefix),
        ConfigLoader.integer("serial.baud", 1200...230_400, \.serial.baud),
        ConfigLoader.number("serial.interByteTimeout", 0.01...60, \.serial.interByteTimeout),
        ConfigLoader.integer("serial.maxLength", 1...65_536, \.serial.maxLength),
        ConfigLoader.number("serial.debounce", 0...3600, \.serial.debounce),
    ]

    public static func validate(_ config: BridgeConfig) throws(ConfigError) {
        let baud = config.serial.baud
        guard baudRates.contains(baud) else {
            throw ConfigError(
                "serial.baud is \(baud); it must be one of "
                    + baudRates.map(String.init).joined(separator: ", ") + " (the scanner's manual names its rate)")
        }
    }

    /// `serial.prefix`: `"stx"`, or null (or an empty string) for none.
    static func prefix(_ value: JSONValue, origin: String) throws(ConfigError) -> Prefix? {
        if value.isNull { return nil }
        guard let text = value.stringValue else { throw ConfigLoader.fail(origin, "\"stx\" or null", value) }
        if text.isEmpty { return nil }
        guard let prefix = Prefix(rawValue: text) else {
            throw ConfigError("\(origin): expected \"stx\" or null, got \"\(text.prefix(16))\"")
        }
        return prefix
    }

    /// `serial.match`: `[{"vendor": "0c2e", "product": "0b61"}, {"devnode": "/dev/ttyACM*"}]`.
    static func matches(_ value: JSONValue, origin: String) throws(ConfigError) -> [Match] {
        let keys = ["vendor", "product", "serial", "model", "path", "devnode"]
        return try ConfigLoader.matchRules(
            value, at: origin, keys: keys + ["name"], usbIDs: ["vendor", "product"], identifying: keys
        )
        .map { rule in
            Match(
                vendor: rule["vendor"], product: rule["product"], serial: rule["serial"], model: rule["model"],
                path: rule["path"], devnode: rule["devnode"], name: rule["name"])
        }
    }

    public static func deviceNames(_ config: BridgeConfig) -> [(key: String, name: String)] {
        DeviceName.given(config.serial.match.map(\.name), in: "serial.match")
    }
}

extension BridgeConfig {
    /// The `serial` section.
    public var serial: SerialConfig {
        get { sections[SerialConfig.self] }
        set { sections[SerialConfig.self] = newValue }
    }
}

/// What udev says of one tty, for matching and naming: its identity (`serial` is `ID_SERIAL_SHORT`, the USB
/// serial number) and whether ModemManager leaves it alone.
public struct SerialPortInfo: IdentifiedDevice, Sendable, Equatable {
    public var identity: DeviceIdentity
    /// udev set `ID_MM_DEVICE_IGNORE=1` on it: ModemManager leaves it alone.
    public var modemManagerIgnores: Bool

    public init(_ identity: DeviceIdentity, modemManagerIgnores: Bool = false) {
        (self.identity, self.modemManagerIgnores) = (identity, modemManagerIgnores)
    }
}
