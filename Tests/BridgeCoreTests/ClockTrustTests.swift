import BridgeCore
import Testing

/// The rule for trusting the wall clock (issue 59), on the facts the kernel gives: adjtimex(2) returns `TIME_ERROR`
/// while the clock is not synchronised (STA_UNSYNC, set until NTP disciplines it), and an RTC's sysfs `hctosys` is
/// 1 when that RTC set the system time at boot (Documentation/ABI/testing/sysfs-class-rtc).
struct ClockTrustTests {
    @Test func aClockNTPKeepsSynchronisedIsTrusted() {
        let trust = ClockTrust.judge(kernelSynchronized: true, rtcSetClockAtBoot: nil, year: 2026)
        #expect(trust == .synchronized && trust.isTrusted && trust.source == "ntp")
        #expect(trust.description == "synchronised by NTP")
    }

    /// A PC or a board with a battery-backed clock, offline: right to its drift, so trusted (a box that never sees
    /// a network would otherwise never have a trusted read).
    @Test func aClockSetFromABatteryClockAtBootIsTrusted() {
        let trust = ClockTrust.judge(kernelSynchronized: false, rtcSetClockAtBoot: "rtc0", year: 2026)
        #expect(trust == .realTimeClock("rtc0") && trust.isTrusted && trust.source == "rtc")
        #expect(trust.description == "set from the hardware clock rtc0 at boot (not synchronised by NTP)")
    }

    /// A board without a battery-backed clock before NTP: the time fake-hwclock saved, or 1970.
    @Test func aClockNeitherNTPNorAnRTCSetIsNotTrusted() {
        let trust = ClockTrust.judge(kernelSynchronized: false, rtcSetClockAtBoot: nil, year: 2026)
        #expect(!trust.isTrusted && trust.source == nil)
        #expect(trust.description == "not trusted: not synchronised by NTP, and no hardware clock set it at boot")
        let unknown = ClockTrust.judge(kernelSynchronized: nil, rtcSetClockAtBoot: nil, year: 2026)
        #expect(!unknown.isTrusted)
    }

    /// An RTC whose battery ran out sets 1970 (or its epoch): no source makes that year right.
    @Test func aClockBeforeThisReleaseIsNotTrustedWhateverSetIt() {
        for (kernel, rtc) in [(true, "rtc0"), (false, "rtc0"), (true, nil)] as [(Bool, String?)] {
            let trust = ClockTrust.judge(kernelSynchronized: kernel, rtcSetClockAtBoot: rtc, year: 1970)
            #expect(trust == .untrusted("the clock says 1970"))
        }
        #expect(ClockTrust.judge(kernelSynchronized: false, rtcSetClockAtBoot: "rtc0", year: 2023).isTrusted == false)
    }
}
