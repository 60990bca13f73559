import Foundation

/// Clock sanity (issue 5, item 4): the read's timestamp is the system clock, unless that clock is found
/// unsynchronised and `location.timeFromGPS` is on.
public enum ClockCheck {
    /// More than this between the system clock and a fresh GPS fix's time means an unsynchronised clock.
    public static let maxOffset = 5.0
    /// A system clock before this year has never been set (no RTC, no NTP yet).
    public static let minYear = 2024
    /// 2024-01-01T00:00:00Z.
    public static let minTime = 1_704_067_200.0

    /// True when the system clock says a year before 2024.
    public static func isBeforeMinYear(systemNow: Double) -> Bool { systemNow < minTime }

    /// System time minus GPS time (positive: the system clock is ahead), from a live fix extrapolated to now.
    public static func offset(systemNow: Double, fix: GPSFix, monotonicNow: Double) -> Double {
        systemNow - fix.gpsTime(atMonotonic: monotonicNow)
    }

    /// Unsynchronised when the year is before 2024, or when a live fix (`recentFix`: received within `maxFixAge`,
    /// not replayed from gpsd's cache, whose old time would look like skew) is more than 5 s off.
    public static func isUnsynchronised(systemNow: Double, recentFix: GPSFix?, monotonicNow: Double) -> Bool {
        if isBeforeMinYear(systemNow: systemNow) { return true }
        guard let fix = recentFix, !fix.replayed else { return false }
        return abs(offset(systemNow: systemNow, fix: fix, monotonicNow: monotonicNow)) > maxOffset
    }

    /// The time to stamp a read with: the system clock, or (when `timeFromGPS` and the clock is unsynchronised
    /// and a live fix exists) the fix's GPS time plus the monotonic time elapsed since it was received.
    public static func readTime(
        systemNow: Double, recentFix: GPSFix?, monotonicNow: Double, timeFromGPS: Bool
    ) -> Double {
        guard timeFromGPS, let fix = recentFix, !fix.replayed,
            isUnsynchronised(systemNow: systemNow, recentFix: fix, monotonicNow: monotonicNow)
        else { return systemNow }
        return fix.gpsTime(atMonotonic: monotonicNow)
    }
}

/// `location.gpsd`: `HOST:PORT`, `HOST` (port 2947), `[IPv6]:PORT` or `[IPv6]`.
public struct GPSDAddress: Sendable, Equatable {
    public var host: String
    public var port: String

    public static let defaultPort = "2947"

    public init(host: String, port: String) {
        self.host = host
        self.port = port
    }

    /// Nil when the text is not an address (empty host, bad port).
    public static func parse(_ text: String) -> GPSDAddress? {
        let text = text.trimmingCharacters(in: .whitespaces)
        var host: Substring
        var port: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            // More than one colon without brackets is a bare IPv6 address.
            if text.firstIndex(of: ":") != colon {
                host = Substring(text)
            } else {
                host = text[..<colon]
                port = text[text.index(after: colon)...]
            }
        } else {
            host = Substring(text)
        }
        guard !host.isEmpty else { return nil }
        if let port {
            guard let n = Int(port), (1...65535).contains(n) else { return nil }
            return GPSDAddress(host: String(host), port: String(n))
        }
        return GPSDAddress(host: String(host), port: defaultPort)
    }
}
