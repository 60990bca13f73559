import BridgeCore
import Logging
import Platform

/// Anything that produces reads (NFC readers, keyboard-wedge scanners, ...): a `Service` the source set starts
/// and stops, which hands each read to its `SourceContext`. Blocking work runs on the source's own threads; `start`
/// and `stop` are called from a thread of their own, never from Swift's cooperative pool.
public protocol ReadSource: Service {
    /// The kind its reads carry.
    var kind: SourceKind { get }
    /// How it stands now: one line and whether a device is attached (status, metrics, the start-up log).
    var state: SourceState { get }
    /// More members for the source's `status` entry (the NFC readers' feedback counters); empty by default.
    var statusDetails: [(String, JSONValue)] { get }
}

extension ReadSource {
    public var name: String { kind.rawValue }
    public var statusDetails: [(String, JSONValue)] { [] }
}

/// What a source is given: its configuration, a logger, and where reads go.
public struct SourceContext: Sendable {
    /// The whole configuration in force when the source was made (a reload makes a new source when its settings
    /// change).
    public let config: BridgeConfig
    public let logger: Logger
    private let handOn: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    /// Called by the source after its `state` changed (a device came or went, pcscd left): `status` and the MQTT
    /// status message follow at once, so nothing has to look at the state periodically.
    public let stateChanged: @Sendable () -> Void

    /// `commit` hands a read to the pipeline and calls back once it is on disk (or found a duplicate, or refused).
    public init(
        config: BridgeConfig, logger: Logger,
        commit: @escaping @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void,
        stateChanged: @escaping @Sendable () -> Void = {}
    ) {
        self.config = config
        self.logger = logger
        self.handOn = commit
        self.stateChanged = stateChanged
    }

    /// Hands `read` on without waiting for its commit.
    public func submit(_ read: Read) { handOn(read) { _ in } }

    /// Hands `read` on and calls `then` once it is committed (on the pipeline's thread: `then` must not block):
    /// the shared post-commit step for a source that gives good-read feedback.
    public func commit(_ read: Read, then: @escaping @Sendable (CommitResult) -> Void) { handOn(read, then) }

    /// The commit callback, for a source that takes one as a closure.
    public var committer: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void { handOn }
}

/// One device a source could read, as `plings-bridge scanners` lists it: the same fields for every transport, so
/// its `scanners --json` object (docs/contracts.md, "Command line") and the lines of its human listing are built
/// here, once (outside text as it is: the command escapes it).
public struct DeviceListing: Sendable, Equatable {
    /// `keyboard`, `hidpos` or `serial`.
    public var transport: String
    public var devnode: String
    /// What the node is, after the product in the first line (`hidraw`, `serial port`); nil for an input device.
    public var nodeKind: String?
    /// The product's name, nil when the device gives none.
    public var product: String?
    /// USB vendor and product ids (`model`, as udev's `ID_MODEL_ID`), lower-case hex.
    public var vendor: String?
    public var model: String?
    public var serial: String?
    public var path: String?
    public var matched: Bool
    /// What a matched device is called in the listing ("scanner", "HID POS scanner").
    public var matchedAs: String
    /// Why it is matched or ignored (the rule, or what disqualifies it).
    public var reason: String
    /// The name its reads carry, when matched.
    public var stableName: String?
    /// The keyboard layout its codes are decoded with (keyboard-wedge scanners only).
    public var layout: String?
    public var openable: Bool
    /// Opening and grabbing worked (keyboards only; nil where a device is not grabbed).
    public var grabbable: Bool?
    /// Why opening or grabbing failed, when it did.
    public var problem: String?

    public init(
        transport: String, devnode: String, nodeKind: String? = nil, product: String?, vendor: String?,
        model: String?, serial: String?, path: String?, matched: Bool, matchedAs: String = "scanner",
        reason: String, stableName: String?, layout: String? = nil, openable: Bool, grabbable: Bool? = nil,
        problem: String? = nil
    ) {
        (self.transport, self.devnode, self.nodeKind, self.product) = (transport, devnode, nodeKind, product)
        (self.vendor, self.model, self.serial, self.path) = (vendor, model, serial, path)
        (self.matched, self.matchedAs, self.reason, self.stableName) = (matched, matchedAs, reason, stableName)
        (self.layout, self.openable, self.grabbable, self.problem) = (layout, openable, grabbable, problem)
    }

    /// The `scanners --json` object.
    public var json: JSONValue {
        func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return .object([
            ("transport", .string(transport)), ("devnode", .string(devnode)), ("name", .string(product ?? devnode)),
            ("vendor", optional(vendor)), ("model", optional(model)), ("serial", optional(serial)),
            ("path", optional(path)), ("matched", .bool(matched)), ("reason", .string(reason)),
            ("openable", .bool(openable)), ("grabbable", grabbable.map(JSONValue.bool) ?? .null),
            ("stableName", matched ? optional(stableName) : .null), ("layout", optional(layout)),
            ("problem", optional(problem)),
        ])
    }

    /// The human listing: the node and what it is, the verdict, the name its reads carry, where it is plugged in
    /// and whether it can be opened.
    public var lines: [String] {
        var lines = [
            "\(devnode)  \(vendor ?? "????"):\(model ?? "????")  \(product ?? "-")"
                + (nodeKind.map { "  (\($0))" } ?? ""),
            "    \(matched ? matchedAs : "ignored"): \(reason)",
        ]
        if matched, let stableName {
            lines.append("    name: \(stableName)" + (layout.map { "  layout: \($0)" } ?? ""))
        }
        lines.append("    serial: \(serial ?? "-")  path: \(path ?? "-")")
        lines.append(
            "    openable: \(openable ? "yes" : "no")" + (grabbable.map { "  grabbable: \($0 ? "yes" : "no")" } ?? "")
                + (problem.map { "  (\($0))" } ?? ""))
        return lines
    }
}

/// The registration of one kind of read source: everything the bridge needs to know of it, so the registry's one
/// list builds the running sources, the `--no-<kind>` flags, the debounce windows, `doctor`, `status` and the
/// metrics, and a new source is one module plus one line there.
public struct ReadSourceModule: Sendable {
    /// The kind its reads carry; also the name of its config section and of its `--no-<kind>` flag.
    public let kind: SourceKind
    /// What it reads, for the flag's help ("the NFC readers").
    public let devices: String
    /// Its configuration section (keys, bounds, checks), registered with the loader.
    public let configSection: any ConfigSection.Type
    /// Whether the configuration turns it on (`<section>.enabled`).
    public let isEnabled: @Sendable (BridgeConfig) -> Bool
    /// Seconds in which a repeat of the same code from the same device is dropped (`<section>.debounce`).
    public let debounce: @Sendable (BridgeConfig) -> Double
    /// True when a reload from the first configuration to the second must replace the running source.
    public let settingsChanged: @Sendable (BridgeConfig, BridgeConfig) -> Bool
    /// A new, unstarted source.
    public let make: @Sendable (SourceContext) -> any ReadSource
    /// The source's `doctor` findings (read-only checks of its hardware and drivers).
    public let doctor: @Sendable (BridgeConfig, Logger) -> [DoctorCheck]
    /// The devices `plings-bridge scanners` lists for it, read-only (nil: the source has none to list there).
    public let listDevices: (@Sendable (BridgeConfig) -> [DeviceListing])?

    public init(
        kind: SourceKind, devices: String, configSection: any ConfigSection.Type,
        isEnabled: @escaping @Sendable (BridgeConfig) -> Bool,
        debounce: @escaping @Sendable (BridgeConfig) -> Double,
        settingsChanged: @escaping @Sendable (BridgeConfig, BridgeConfig) -> Bool,
        make: @escaping @Sendable (SourceContext) -> any ReadSource,
        doctor: @escaping @Sendable (BridgeConfig, Logger) -> [DoctorCheck],
        listDevices: (@Sendable (BridgeConfig) -> [DeviceListing])? = nil
    ) {
        self.kind = kind
        self.devices = devices
        self.configSection = configSection
        self.isEnabled = isEnabled
        self.debounce = debounce
        self.settingsChanged = settingsChanged
        self.make = make
        self.doctor = doctor
        self.listDevices = listDevices
    }

    /// The key its `--no-<kind>` flag sets to false.
    public var enabledKey: String { kind.rawValue + ".enabled" }
}

/// A read source's configuration section: `<section>.enabled` turns it on, `<section>.debounce` is the window in
/// which a repeat of one code from one device is dropped.
public protocol SourceSection: ConfigSection, Equatable {
    var enabled: Bool { get }
    var debounce: Double { get }
}

extension ReadSourceModule {
    /// The registration of a source whose section is `config[keyPath: section]`: whether it is on, its debounce
    /// window and whether a reload must replace it all follow from that section; `alsoRestartsWhen` names what else
    /// it is built from (`hosts`, say).
    public init<Section: SourceSection>(
        kind: SourceKind, devices: String, section: KeyPath<BridgeConfig, Section> & Sendable,
        alsoRestartsWhen: @escaping @Sendable (BridgeConfig, BridgeConfig) -> Bool = { _, _ in false },
        make: @escaping @Sendable (SourceContext) -> any ReadSource,
        doctor: @escaping @Sendable (BridgeConfig, Logger) -> [DoctorCheck],
        listDevices: (@Sendable (BridgeConfig) -> [DeviceListing])? = nil
    ) {
        self.init(
            kind: kind, devices: devices, configSection: Section.self, isEnabled: { $0[keyPath: section].enabled },
            debounce: { $0[keyPath: section].debounce },
            settingsChanged: { $0[keyPath: section] != $1[keyPath: section] || alsoRestartsWhen($0, $1) },
            make: make, doctor: doctor, listDevices: listDevices)
    }
}
