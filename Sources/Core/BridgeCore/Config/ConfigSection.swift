/// A module's own configuration section (`hid`, `nfc`, ...): its fields with their documented defaults (`init()`),
/// its keys with their types and bounds, the checks across its keys, and which of its keys a reload cannot apply.
/// The module registers the type with the loader (`ConfigLoader(sections:)`); nothing outside it names its keys.
public protocol ConfigSection: Sendable, Equatable {
    /// The section's JSON object and its keys' prefix (`hid` for `hid.layout`).
    static var name: String { get }
    /// Every field at its documented default.
    init()
    /// The section's keys, each spelled, typed and bounded once, storing into `BridgeConfig`'s slot for the section
    /// (the module declares `BridgeConfig.<name>` as the slot; see `ConfigSections`).
    static var keys: [ConfigLoader.Key] { get }
    /// The keys (full paths) whose change from `old` to `new` a reload cannot apply to the running module; a
    /// reload names them in one log line (docs/configuration.md marks them **restart**).
    static func keysNeedingRestart(from old: BridgeConfig, to new: BridgeConfig) -> [String]
    /// Checks that need several keys, or the module's own knowledge (xkb-data for `hid`), after every layer is
    /// applied. The thrown message names the key at fault.
    static func validate(_ config: BridgeConfig) throws(ConfigError)
    /// The operator's device names the section's rules give (`hid.match[0].name`, with the name), in order: no two
    /// rules of any section may give one name (`DeviceName.checkUnique`).
    static func deviceNames(_ config: BridgeConfig) -> [(key: String, name: String)]
}

extension ConfigSection {
    public static func keysNeedingRestart(from old: BridgeConfig, to new: BridgeConfig) -> [String] { [] }
    public static func validate(_ config: BridgeConfig) throws(ConfigError) {}
    public static func deviceNames(_ config: BridgeConfig) -> [(key: String, name: String)] { [] }

    fileprivate func isEqual(to other: any ConfigSection) -> Bool { (other as? Self) == self }
    fileprivate var isDefault: Bool { self == Self() }
}

/// The values of the registered sections inside `BridgeConfig`, one per section name. A section never set reads as
/// its defaults, and equals a section set to its defaults, so two configurations compare by what they say.
///
/// A module reaches its own section through a property it declares on `BridgeConfig`:
/// `public var hid: HIDConfig { get { sections[HIDConfig.self] } set { sections[HIDConfig.self] = newValue } }`.
public struct ConfigSections: Sendable, Equatable {
    private var values: [String: any ConfigSection] = [:]

    public init() {}

    public subscript<Section: ConfigSection>(_ type: Section.Type) -> Section {
        get { values[Section.name] as? Section ?? Section() }
        set { values[Section.name] = newValue }
    }

    public static func == (a: ConfigSections, b: ConfigSections) -> Bool {
        for name in Set(a.values.keys).union(b.values.keys) {
            switch (a.values[name], b.values[name]) {
            case (let x?, let y?): if !x.isEqual(to: y) { return false }
            case (let x?, nil), (nil, let x?): if !x.isDefault { return false }
            case (nil, nil): break
            }
        }
        return true
    }
}
