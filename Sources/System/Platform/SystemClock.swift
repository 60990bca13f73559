import CSysShim
import Foundation

/// The system's clocks as a read's time needs them (issue 59): the boot's id, its own clock, and the kernel's
/// verdict on the wall clock.
public enum SystemClock {
    /// This boot's id (`/proc/sys/kernel/random/boot_id`); empty when the kernel does not give one. Read once: it
    /// cannot change while the process lives.
    public static let bootID: String = {
        let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }()

    /// Seconds on `CLOCK_BOOTTIME`: since the boot, suspend included; never stepped (clock_gettime(2)).
    public static func bootTime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// The kernel's verdict on the wall clock (adjtimex(2)): true when synchronised, false when it reports
    /// `TIME_ERROR` (never set by NTP, or `STA_UNSYNC`), nil when it cannot be asked.
    public static func synchronized() -> Bool? {
        switch plings_clock_unsynchronized() {
        case 0: return true
        case 1: return false
        default: return nil
        }
    }

    /// The RTC that set the wall clock at this boot (`rtc0`...: its sysfs `hctosys` is 1), nil when none did.
    /// Read once: it cannot change within a boot.
    public static let rtcSetClockAtBoot: String? = {
        let directory = "/sys/class/rtc"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
        return names.first { name in
            let text = try? String(contentsOfFile: "\(directory)/\(name)/hctosys", encoding: .utf8)
            return text?.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        }
    }()
}
