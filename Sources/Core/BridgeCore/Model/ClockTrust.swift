/// Whether the wall clock can be trusted for a read's time, and on what (issue 59). Decided from facts the system
/// gives (`ClockTrust.ofSystem()` gathers them); this is the rule, free of I/O.
///
/// - The kernel says the clock is synchronised (adjtimex(2) without `TIME_ERROR`: NTP, through systemd-timesyncd,
///   chrony or ntpd, disciplines it): trusted.
/// - A hardware clock set it at boot (an RTC with `hctosys` 1, Documentation/ABI/testing/sysfs-class-rtc), as on a
///   PC or a board with a battery-backed clock: trusted, though not (yet) synchronised. A box offline for months on
///   its battery clock is right to its drift, and holding every read of it for a network that may never come
///   would be worse.
/// - Otherwise (a board without a battery-backed clock: it boots with the time fake-hwclock saved at shutdown, or
///   1970, until NTP or a GPS sets it): not trusted.
/// - Whatever the sources, a clock before `earliestYear` is not trusted (an RTC whose battery ran out).
///
/// GPS time (`location.timeFromGPS`) is trusted per read, where the pipeline knows the read was stamped with it.
public enum ClockTrust: Sendable, Equatable {
    /// The kernel says NTP keeps the clock synchronised.
    case synchronized
    /// A hardware clock (the named RTC) set it at boot; NTP has not (yet) confirmed it.
    case realTimeClock(String)
    /// Not trusted, and why, in words for `doctor` and `status`.
    case untrusted(String)

    /// A clock that says a year before this is wrong whatever set it (the year this release was made).
    public static let earliestYear = 2024

    /// The rule. `kernelSynchronized`: adjtimex's verdict (nil: it could not be asked); `rtcSetClockAtBoot`: the
    /// RTC that set the clock at boot (`rtc0`), nil when none did; `year`: the clock's year now.
    public static func judge(kernelSynchronized: Bool?, rtcSetClockAtBoot: String?, year: Int) -> ClockTrust {
        if year < earliestYear { return .untrusted("the clock says \(year)") }
        if kernelSynchronized == true { return .synchronized }
        if let rtc = rtcSetClockAtBoot { return .realTimeClock(rtc) }
        return .untrusted(
            kernelSynchronized == nil
                ? "the kernel cannot say whether it is synchronised, and no hardware clock set it at boot"
                : "not synchronised by NTP, and no hardware clock set it at boot")
    }

    public var isTrusted: Bool {
        if case .untrusted = self { return false }
        return true
    }

    /// What the clock rests on, for `status` and the metrics: "ntp", "rtc", or nil when not trusted.
    public var source: String? {
        switch self {
        case .synchronized: return "ntp"
        case .realTimeClock: return "rtc"
        case .untrusted: return nil
        }
    }

    /// One plain line: "synchronised by NTP", "set from the hardware clock rtc0 at boot (not synchronised by
    /// NTP)", "not trusted: ...".
    public var description: String {
        switch self {
        case .synchronized: return "synchronised by NTP"
        case .realTimeClock(let rtc): return "set from the hardware clock \(rtc) at boot (not synchronised by NTP)"
        case .untrusted(let reason): return "not trusted: \(reason)"
        }
    }
}
