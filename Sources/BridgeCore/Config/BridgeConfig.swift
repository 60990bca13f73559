/// The service configuration (docs/contracts.md, "Configuration"; every key in docs/configuration.md). Every field
/// has the documented default.
public struct BridgeConfig: Sendable, Equatable {
    public var api = API()
    public var spool = Spool()
    public var nfc = NFC()
    public var hid = HID()
    public var location = Location()
    public var metrics = Metrics()
    public var mqtt = MQTT()
    /// Accepted Plings URL hosts (replaces the default list when configured).
    public var hosts: [String] = ["s.plings.io"]

    public init() {}

    /// `api`: where and how scans are delivered. No `url` means "local spool only".
    public struct API: Sendable, Equatable {
        public var url: String?
        public var tokenFile: String?
        public var document: String = GraphQLRequestBody.defaultDocument
        public var timeout: Double = 10
        public var concurrency: Int = 4
        public var allowInsecureHTTP = false
    }

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

    /// `nfc`: PC/SC readers.
    public struct NFC: Sendable, Equatable {
        public var enabled = true
        /// Shell-style reader name patterns; empty means every reader.
        public var readers: [String] = []
        public var debounce: Double = 2
        /// `nfc.profiles`: reader-name substring -> profile, first match wins; unmatched readers are recognised
        /// by name (`ReaderProfile.recognize`).
        public var profiles: [ReaderProfile.Rule] = []
        /// `nfc.feedback`: beep and LED by outcome, after the commit.
        public var feedback = Feedback()
        /// `nfc.silenceDetectBeep`: turn off the reader's own beep on card detection (writes a reader setting).
        public var silenceDetectBeep = false

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
    }

    /// `hid`: keyboard-wedge barcode scanners.
    public struct HID: Sendable, Equatable {
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

            public init(
                vendor: String? = nil, model: String? = nil, serial: String? = nil, path: String? = nil,
                layout: String? = nil, variant: String? = nil
            ) {
                self.variant = variant
                self.vendor = vendor
                self.model = model
                self.serial = serial
                self.path = path
                self.layout = layout
            }
        }
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

    /// `mqtt`: publishing scans and device health to an MQTT broker. No `url` means no MQTT.
    public struct MQTT: Sendable, Equatable {
        /// `mqtt://host[:1883]` (loopback only unless `allowInsecure`) or `mqtts://host[:8883]`.
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
    }

    /// `metrics`: Prometheus textfile output.
    public struct Metrics: Sendable, Equatable {
        public var textfile: String?
        public var interval: Double = 15
    }
}
