import Foundation
import BridgeCore
import Logging
import Platform
import Spool

/// Anything that consumes committed scans (the Plings API, an MQTT broker, ...): a `Service` in the group's sink
/// layer, started before the pipeline and stopped after it. A sink reads what it needs from the spool (every
/// committed scan is there first) and is woken after each commit; it owns its threads, and blocking work never runs
/// on Swift's cooperative pool.
public protocol ScanSink: Service {
    /// Scans were committed: look at the spool again. Never blocks (it runs on the pipeline's commit thread).
    func wake()
    /// A reload: start, stop or reconfigure what `configuration` asks for. May block: it is called on a thread of
    /// its own, never the cooperative pool.
    func apply(_ configuration: SinkConfiguration)
    /// Its member of `status` (docs/contracts.md), `.null` where the contract allows a sink that is not configured.
    var statusEntry: JSONValue { get }
    /// Adds its metric families (docs/operations.md lists every one).
    func addMetrics(to metrics: inout MetricsText)
}

extension ScanSink {
    public func addMetrics(to metrics: inout MetricsText) {}
}

/// The configuration a sink runs with: the whole file's, and the API token loaded beside it (from its file, the
/// environment or systemd's credential; never logged).
public struct SinkConfiguration: Sendable {
    public let config: BridgeConfig
    public let apiToken: String?

    public init(config: BridgeConfig, apiToken: String?) {
        self.config = config
        self.apiToken = apiToken
    }
}

/// What a sink is given when it is made.
public struct SinkContext: Sendable {
    public let spool: Spool
    public let logger: Logger
    /// The configuration in force at start; reloads come through `ScanSink.apply`.
    public let configuration: SinkConfiguration
    /// The service's status: the status reporter builds it, the sinks that publish it read it here and say here
    /// when their health changed.
    public let board: StatusBoard

    public init(spool: Spool, logger: Logger, configuration: SinkConfiguration, board: StatusBoard = StatusBoard()) {
        self.spool = spool
        self.logger = logger
        self.configuration = configuration
        self.board = board
    }

    /// Called by the sink after its health changed (failing, resumed, paused): `status` follows at once.
    public var stateChanged: @Sendable () -> Void { { [board] in board.changed() } }

    /// Called by the sink after it recorded deliveries (the spool's counts changed): `status` follows within a
    /// second, once per second during a drain.
    public var delivered: @Sendable () -> Void { { [board] in board.changedSoon() } }

    /// The device's health in a few fields that change only with it (the MQTT sink's retained status message):
    /// version, sources up, spool backlog (`unpublished`: what `sink`'s queue still holds), last read, fix.
    public func deviceStatus(for sink: String) -> JSONValue {
        board.device(sinkPending: (try? spool.sinkStats(named: sink))?.pending ?? 0)
    }

    /// The running service's whole status object (`plings-bridge status --json`), no older than this call.
    public func serviceStatus() -> JSONValue { board.fresh().status }

    /// The running service's metrics in the Prometheus text format (what `metrics.textfile` holds), no older than
    /// this call.
    public func serviceMetrics() -> String { board.fresh(metrics: true).metrics }
}

/// What a sink's `doctor` check is given: the configuration, the token when this user could read it, and the
/// token file it could not read (a member of group plings on an installed box), so the check says what it could
/// not check instead of claiming there is nothing to check.
public struct SinkDoctorContext: Sendable {
    public let configuration: SinkConfiguration
    public let unreadableToken: String?
    public let logger: Logger

    public init(configuration: SinkConfiguration, unreadableToken: String?, logger: Logger) {
        self.configuration = configuration
        self.unreadableToken = unreadableToken
        self.logger = logger
    }
}

extension SinkDoctorContext {
    /// A `skip` finding when one of a section's credential `files` exists but this user may not read it (a member
    /// of group plings; the service's files are plings:plings 0600): what could not be checked, instead of a
    /// failure. Nil when every file is readable or missing (the section's own error then says what is wrong).
    public func unreadableCredential(_ files: [String?], check: String, subject: String, what: String) -> DoctorCheck? {
        guard let path = files.compactMap({ $0 }).first(where: { access($0, F_OK) == 0 && access($0, R_OK) != 0 })
        else { return nil }
        return DoctorCheck(
            check, .skip,
            "\(subject); this user cannot read \(path), so \(what) is not checked (the service reads it)",
            fix: "run doctor as root to check \(what): sudo plings-bridge doctor")
    }
}

/// The registration of one kind of sink: everything the bridge needs to know of it, so the registry's one list
/// builds the running sinks, their config sections, `doctor`, `status` and the metrics, and a new sink is one
/// module plus one line there (docs/architecture.md, "Add a sink").
public struct ScanSinkModule: Sendable {
    /// A short name for logs and the sink's thread names ("api", "mqtt").
    public let name: String
    /// Its member of the `status` object (its name: "api", "mqtt").
    public let statusKey: String
    /// Former names of that member, kept beside it for a release (docs/contracts.md, "Aliases").
    public let statusAliases: [String]
    /// Its configuration section, registered with the loader; nil when its keys are core ones.
    public let configSection: (any ConfigSection.Type)?
    /// A new, unstarted sink.
    public let make: @Sendable (SinkContext) -> any ScanSink
    /// Its `doctor` findings (read-only: a probe never disturbs the running service).
    public let doctor: @Sendable (SinkDoctorContext) -> [DoctorCheck]
    /// The spool queue it delivers from when a configuration enables it (nil: none, or not enabled). Every process
    /// that commits reads registers these first, so a read accepted while the sink is configured is the sink's to
    /// deliver even when no `run` has opened the spool yet (`scan` on a fresh box).
    public let queue: @Sendable (BridgeConfig) -> String?

    public init(
        name: String, statusKey: String, statusAliases: [String] = [], configSection: (any ConfigSection.Type)?,
        make: @escaping @Sendable (SinkContext) -> any ScanSink,
        doctor: @escaping @Sendable (SinkDoctorContext) -> [DoctorCheck],
        queue: @escaping @Sendable (BridgeConfig) -> String? = { _ in nil }
    ) {
        self.name = name
        self.statusKey = statusKey
        self.statusAliases = statusAliases
        self.configSection = configSection
        self.make = make
        self.doctor = doctor
        self.queue = queue
    }
}
