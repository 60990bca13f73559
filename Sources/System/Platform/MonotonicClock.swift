import CSysShim
import Glibc

/// The one clock for deadlines, timeouts and ages in plings-bridge: `CLOCK_MONOTONIC`, in seconds from an
/// arbitrary origin.
///
/// A gate box without a real-time clock boots with a wrong wall clock that NTP later steps by months; the
/// monotonic clock never jumps, so a wait on it neither hangs after a backward step nor fires early after a
/// forward one. Wall-clock time (`Date`) is only for what is recorded (a scan's timestamp, the spool's times).
public enum MonotonicClock {
    /// Now, in seconds.
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// The deadline `seconds` from now (never earlier than now).
    public static func deadline(after seconds: Double) -> Double { now() + max(0, seconds) }

    /// Sleeps until `deadline` (seconds of this clock). Only for short pauses on a thread that has nothing else to
    /// wait for (a busy SQLite retry, a pause between a reader's commands); anything a stop must interrupt waits on
    /// a `Monitor` instead.
    public static func sleep(until deadline: Double) { plings_sleep_until(deadline) }

    /// Sleeps `seconds` on this clock.
    public static func sleep(seconds: Double) { sleep(until: deadline(after: seconds)) }
}
