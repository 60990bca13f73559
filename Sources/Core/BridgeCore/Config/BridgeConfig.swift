/// The service configuration (docs/contracts.md, "Configuration"; every key in docs/configuration.md). Every field
/// has the documented default. The sections of the read sources and the sinks live in their modules
/// (`ConfigSection`).
public struct BridgeConfig: Sendable, Equatable {
    public var spool = Spool()
    public var location = Location()
    public var metrics = Metrics()
    /// Accepted Plings URL hosts (replaces the default list when configured).
    public var hosts: [String] = ["s.plings.io"]
    /// The sections modules own (`api`, `nfc`, `hid`, `mqtt`, ...), each read through the property its module declares.
    public var sections = ConfigSections()

    public init() {}

    /// `spool`: the durable SQLite store.
    public struct Spool: Sendable, Equatable {
        /// nil: `$STATE_DIRECTORY/spool.sqlite`, else `$XDG_STATE_HOME/plings-bridge/spool.sqlite`.
        public var path: String?
        public var synchronous: Synchronous = .full
        /// Seconds after which delivered rows are pruned.
        public var deliveredRetention: Double = 604_800
    }

    /// SQLite's `synchronous` pragma: `full` makes every acknowledged scan durable across power loss.
    public enum Synchronous: String, Sendable, CaseIterable {
        case full
        case normal
        case off
    }

    /// `location`: gpsd and the fixed gate position.
    public struct Location: Sendable, Equatable {
        public var enabled = true
        public var gpsd = "127.0.0.1:2947"
        public var maxFixAge: Double = 10
        public var minMode = 2
        public var fixed: LocationFix?
        /// Take the scan time from a fresh GPS fix when the system clock is found unsynchronised.
        public var timeFromGPS = false
    }

    /// `metrics`: Prometheus textfile output.
    public struct Metrics: Sendable, Equatable {
        public var textfile: String?
        public var interval: Double = 15
    }
}
