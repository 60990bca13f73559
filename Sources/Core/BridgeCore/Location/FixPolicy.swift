import Foundation

/// A GPS position we accepted, with when it was received on the local monotonic clock.
public struct GPSFix: Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    /// Horizontal error in metres (see `HorizontalAccuracy`), nil when gpsd gave no estimate.
    public var accuracy: Double?
    public var mode: Int
    /// The TPV time (GPS/UTC), seconds since the Unix epoch.
    public var gpsTime: Double
    /// Local CLOCK_MONOTONIC seconds when the TPV was read: ages are measured on this clock, which neither jumps
    /// nor stops when the wall clock is set.
    public var receivedAt: Double
    /// From a `?POLL;` answer (gpsd's cache), not a live report.
    public var replayed: Bool

    public init(
        latitude: Double, longitude: Double, accuracy: Double?, mode: Int, gpsTime: Double, receivedAt: Double,
        replayed: Bool = false
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.accuracy = accuracy
        self.mode = mode
        self.gpsTime = gpsTime
        self.receivedAt = receivedAt
        self.replayed = replayed
    }

    /// The value attached to a scan.
    public var locationFix: LocationFix { LocationFix(latitude: latitude, longitude: longitude, accuracy: accuracy) }

    /// GPS time now, extrapolated from the TPV by the monotonic time elapsed since it was received.
    public func gpsTime(atMonotonic now: Double) -> Double { gpsTime + max(0, now - receivedAt) }
}

/// The horizontal error of a fix (`accuracy` in docs/contracts.md, "resolveIdentifier input").
public enum HorizontalAccuracy {
    /// gpsd's `eph` when present (it follows the receiver's HDOP). Otherwise the error ellipse's axes combined as
    /// `sqrt(epx² + epy²)`: the radius that contains the ellipse's 1-sigma box, so never smaller than either axis
    /// (taking the larger axis alone would under-report a round error by ~30 %). With only one axis, that one.
    /// Nil when nothing is known; the scan then omits `accuracy`.
    public static func from(eph: Double?, epx: Double?, epy: Double?) -> Double? {
        func usable(_ v: Double?) -> Double? { v.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil } }
        if let eph = usable(eph) { return eph }
        switch (usable(epx), usable(epy)) {
        case let (x?, y?): return (x * x + y * y).squareRoot()
        case let (x?, nil): return x
        case let (nil, y?): return y
        case (nil, nil): return nil
        }
    }
}

/// What one TPV does to the current fix.
public enum FixUpdate: Sendable, Equatable {
    /// A usable fix: it replaces the current one.
    case fix(GPSFix)
    /// The receiver says it has no fix good enough (mode below `minMode`): forget the current one at once rather
    /// than let it linger up to `maxFixAge` (a receiver that says "lost" knows better than our timer).
    case lost
    /// Nothing to learn (no time, no position, not a TPV): keep what we have. gpsd 3.22 sends TPVs without time
    /// (first sentence a GSA) and a first RMC-only TPV per start; they must not be trusted.
    case ignore
}

/// Fix freshness (`location` in docs/configuration.md), without I/O or clocks (callers pass the times in).
public struct FixPolicy: Sendable, Equatable {
    public var maxFixAge: Double
    public var minMode: Int

    public init(maxFixAge: Double = 10, minMode: Int = 2) {
        self.maxFixAge = maxFixAge
        self.minMode = max(2, min(3, minMode))
    }

    /// What a report means for the current fix, received at monotonic time `receivedAt`.
    public func update(for report: GPSReport, receivedAt: Double) -> FixUpdate {
        guard report.kind == .tpv, let mode = report.mode, let time = report.time else { return .ignore }
        guard mode >= minMode else { return mode >= 1 ? .lost : .ignore }
        guard let latitude = report.latitude, let longitude = report.longitude else { return .ignore }
        let accuracy = HorizontalAccuracy.from(eph: report.eph, epx: report.epx, epy: report.epy)
        return .fix(
            GPSFix(
                latitude: latitude, longitude: longitude, accuracy: accuracy, mode: mode, gpsTime: time,
                receivedAt: receivedAt, replayed: report.replayed))
    }

    /// Seconds since the fix was received (monotonic).
    public func age(of fix: GPSFix, monotonicNow: Double) -> Double { max(0, monotonicNow - fix.receivedAt) }

    /// Fresh while it arrived less than `maxFixAge` ago on the monotonic clock, and only when it arrived live.
    ///
    /// A fix's GPS time is not compared with the system clock: the bridge flags that clock as wrong when they
    /// disagree, and receivers report dates in the future of it (GPS week rollovers), which would make an old
    /// fix look young. gpsd's `?POLL` answer (`replayed`) is never fresh: it repeats the last fix for as long as
    /// the receiver is silent, however old, so its arrival says nothing about when it was measured.
    public func isFresh(_ fix: GPSFix, monotonicNow: Double) -> Bool {
        !fix.replayed && age(of: fix, monotonicNow: monotonicNow) < maxFixAge
    }
}
