import Foundation

/// One message from gpsd as the C shim returned it, validated: garbage (NaN, infinities, coordinates off the
/// globe, negative errors, absurd times or satellite counts) becomes `nil`, never a value.
///
/// Built by `GPSReport.validate(...)`, a pure function over plain numbers, so it can be fuzzed without gpsd.
public struct GPSReport: Sendable, Equatable {
    /// What the message was.
    public enum Kind: Sendable, Equatable {
        /// A time-position-velocity report.
        case tpv
        /// A satellite report.
        case sky
        /// A `?POLL;` answer that carried no TPV (gpsd has never had a fix).
        case emptyPoll
        /// Anything else (VERSION, DEVICES, WATCH, ERROR...).
        case other
    }

    public var kind: Kind
    /// Fix mode (0 not seen, 1 none, 2 2D, 3 3D).
    public var mode: Int?
    public var latitude: Double?
    public var longitude: Double?
    /// Horizontal error estimates in metres.
    public var eph: Double?
    public var epx: Double?
    public var epy: Double?
    /// TPV time, seconds since the Unix epoch.
    public var time: Double?
    public var satellitesUsed: Int?
    public var satellitesVisible: Int?
    /// The TPV is gpsd's cached last fix from a `?POLL;` answer, not a live report: it may be old.
    public var replayed: Bool

    public init(
        kind: Kind, mode: Int? = nil, latitude: Double? = nil, longitude: Double? = nil, eph: Double? = nil,
        epx: Double? = nil, epy: Double? = nil, time: Double? = nil, satellitesUsed: Int? = nil,
        satellitesVisible: Int? = nil, replayed: Bool = false
    ) {
        self.kind = kind
        self.mode = mode
        self.latitude = latitude
        self.longitude = longitude
        self.eph = eph
        self.epx = epx
        self.epy = epy
        self.time = time
        self.satellitesUsed = satellitesUsed
        self.satellitesVisible = satellitesVisible
        self.replayed = replayed
    }

    /// Flag bits of the shim's report (`PLINGS_GPS_HAS_*` in plings_gps.h; pinned by a unit test there too).
    public enum Flag {
        public static let mode: UInt32 = 1 << 0
        public static let latLon: UInt32 = 1 << 1
        public static let time: UInt32 = 1 << 2
        public static let eph: UInt32 = 1 << 3
        public static let epx: UInt32 = 1 << 4
        public static let epy: UInt32 = 1 << 5
        public static let satellites: UInt32 = 1 << 6
        public static let fromPoll: UInt32 = 1 << 7
    }

    /// Kinds of the shim's report (`PLINGS_GPS_TPV`...).
    public enum RawKind {
        public static let other: Int32 = 0
        public static let tpv: Int32 = 1
        public static let sky: Int32 = 2
        public static let emptyPoll: Int32 = 3
    }

    /// Errors above this are not an estimate but a broken receiver (gpsd itself caps nothing).
    public static let maxError = 100_000.0
    /// Times before 2000 or after 2200 are garbage (a GPS week rollover bug, an uninitialised field).
    public static let timeRange = 946_684_800.0...7_258_118_400.0

    /// Turns the shim's plain values into a report; each field is kept only when its flag is set and its value
    /// makes sense. An unknown `kind` is `.other`.
    public static func validate(
        kind: Int32, flags: UInt32, mode: Int32, latitude: Double, longitude: Double, eph: Double, epx: Double,
        epy: Double, time: Double, satellitesUsed: Int32, satellitesVisible: Int32
    ) -> GPSReport {
        func has(_ flag: UInt32) -> Bool { flags & flag != 0 }
        func error(_ value: Double, _ flag: UInt32) -> Double? {
            has(flag) && value.isFinite && value >= 0 && value <= maxError ? value : nil
        }
        var report = GPSReport(kind: .other)
        switch kind {
        case RawKind.tpv: report.kind = .tpv
        case RawKind.sky: report.kind = .sky
        case RawKind.emptyPoll: report.kind = .emptyPoll
        default: report.kind = .other
        }
        report.replayed = has(Flag.fromPoll)
        if has(Flag.mode), (0...3).contains(mode) { report.mode = Int(mode) }
        if has(Flag.latLon), latitude.isFinite, longitude.isFinite, abs(latitude) <= 90, abs(longitude) <= 180 {
            report.latitude = latitude
            report.longitude = longitude
        }
        report.eph = error(eph, Flag.eph)
        report.epx = error(epx, Flag.epx)
        report.epy = error(epy, Flag.epy)
        if has(Flag.time), time.isFinite, timeRange.contains(time) { report.time = time }
        if has(Flag.satellites), (0...1024).contains(satellitesUsed), (0...1024).contains(satellitesVisible) {
            report.satellitesUsed = Int(satellitesUsed)
            report.satellitesVisible = Int(satellitesVisible)
        }
        return report
    }
}
