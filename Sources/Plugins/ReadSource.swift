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

/// One device a source could read, as `plings-bridge scanners` lists it: its `scanners --json` object
/// (docs/contracts.md) and the lines of its human listing (outside text as it is: the command escapes it).
public struct DeviceListing: Sendable {
    public var json: JSONValue
    public var lines: [String]

    public init(json: JSONValue, lines: [String]) {
        self.json = json
        self.lines = lines
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
