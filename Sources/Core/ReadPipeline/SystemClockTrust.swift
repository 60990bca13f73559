import BridgeCore
import Foundation
import Platform

extension ClockTrust {
    /// Whether this system's wall clock can be trusted now, and on what: the rule on the kernel's verdict
    /// (adjtimex), the RTC that set the clock at boot, and the year (`SystemClock`).
    public static func ofSystem(now: Date = Date()) -> ClockTrust {
        judge(
            kernelSynchronized: SystemClock.synchronized(), rtcSetClockAtBoot: SystemClock.rtcSetClockAtBoot,
            year: Calendar(identifier: .gregorian).component(.year, from: now))
    }
}
