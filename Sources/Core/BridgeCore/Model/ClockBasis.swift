import Foundation

/// What a read's time rests on (issue 59; docs/contracts.md, "Spool record"): the boot it was made in, where it
/// was on that boot's own clock, and whether the wall clock was trusted then. A box without a battery-backed clock
/// (most single-board computers) boots with the time it saved at shutdown, or 1970, until NTP or a GPS sets it; a
/// read made meanwhile carries a wall time that may be wrong by the length of an outage, and this is what lets it
/// be placed in time once the clock is known, as journald places a boot's entries by `_BOOT_ID` and
/// `__MONOTONIC_TIMESTAMP`.
public struct ClockBasis: Sendable, Equatable {
    /// The kernel's id of the boot (`/proc/sys/kernel/random/boot_id`, a UUID).
    public var bootID: String
    /// Seconds on `CLOCK_BOOTTIME` at the read: since the boot, suspend included; never stepped.
    public var bootTime: Double
    /// The wall clock was trusted at the read (`ClockTrust`: synchronised by NTP, or set from a hardware clock at
    /// boot), or the read was stamped with GPS time.
    public var trusted: Bool

    public init(bootID: String, bootTime: Double, trusted: Bool) {
        self.bootID = bootID
        self.bootTime = bootTime
        self.trusted = trusted
    }

    /// The basis of a read stamped `readTime` when, at `wallNow`, the boot's clock said `bootNow`: the boot time
    /// at the read is the one now less the wall time since (a read reaches the pipeline within milliseconds, so a
    /// clock step in between is the only error, and it is bounded by that gap).
    public static func of(
        readTime: Date, wallNow: Date, bootNow: Double, bootID: String, trusted: Bool
    ) -> ClockBasis {
        let since = max(0, min(wallNow.timeIntervalSince(readTime), bootNow))
        return ClockBasis(bootID: bootID, bootTime: bootNow - since, trusted: trusted)
    }

    /// In JSON (`spool list --json`, `spool export`, what sinks send): `{"bootId", "bootTime", "trusted"}`, the
    /// boot time in seconds with microseconds.
    public var json: JSONValue {
        .object([
            ("bootId", .string(bootID)), ("bootTime", .number((bootTime * 1_000_000).rounded() / 1_000_000)),
            ("trusted", .bool(trusted)),
        ])
    }
}
