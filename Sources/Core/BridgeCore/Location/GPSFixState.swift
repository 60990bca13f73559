import Foundation

/// What the bridge knows from gpsd, folded one report at a time: the current fix, the last live one, the last
/// mode, the satellite counts and whether the system clock disagrees with GPS time.
///
/// Pure: no I/O and no clocks; the caller passes the monotonic receive time and the wall-clock time. The gpsd
/// client keeps one behind its lock and feeds it every report it reads.
public struct GPSFixState: Sendable, Equatable {
    public let policy: FixPolicy
    /// Reports that tell what gpsd knows (TPVs, and POLL answers with or without a TPV).
    public private(set) var reports = 0
    /// Mode of the last TPV that carried one (0 not seen, 1 no fix, 2 2D, 3 3D).
    public private(set) var lastMode: Int?
    /// The fix to attach to reads while fresh; nil when none, or once the receiver reported losing it.
    public private(set) var fix: GPSFix?
    /// The last live (streamed, not replayed by `?POLL`) fix, for the clock check and one-shot scans.
    public private(set) var liveFix: GPSFix?
    public private(set) var satellitesUsed: Int?
    public private(set) var satellitesVisible: Int?
    /// The system clock was found unsynchronised (year before `ClockCheck.minYear`, or off a live fix).
    public private(set) var clockUnsynchronised = false
    /// A clock warning was logged (once per client).
    private var clockWarned = false

    public init(policy: FixPolicy) { self.policy = policy }

    /// What one report changed, for the caller's wake-ups and log.
    public struct Change: Sendable, Equatable {
        /// The report counts as an answer from gpsd (a TPV or a POLL answer): waiters for one may wake.
        public var counted: Bool
        /// The system clock disagrees with this live fix for the first time: system minus GPS time in seconds,
        /// to be logged once.
        public var clockWarning: Double?
    }

    /// Folds `report`, received at monotonic `receivedAt` with the system clock reading `systemNow` (seconds
    /// since 1970).
    public mutating func apply(_ report: GPSReport, receivedAt: Double, systemNow: Double) -> Change {
        if let used = report.satellitesUsed, let visible = report.satellitesVisible {
            satellitesUsed = used
            satellitesVisible = visible
        }
        switch report.kind {
        case .emptyPoll:
            reports += 1
            return Change(counted: true)
        case .tpv:
            break
        case .sky, .other:
            return Change(counted: false)
        }
        if let mode = report.mode { lastMode = mode }
        var change = Change(counted: true)
        switch policy.update(for: report, receivedAt: receivedAt) {
        case .fix(let fix):
            self.fix = fix
            if !fix.replayed {
                liveFix = fix
                clockUnsynchronised = ClockCheck.isUnsynchronised(
                    systemNow: systemNow, recentFix: fix, monotonicNow: receivedAt)
                if clockUnsynchronised && !clockWarned {
                    clockWarned = true
                    change.clockWarning = ClockCheck.offset(systemNow: systemNow, fix: fix, monotonicNow: receivedAt)
                }
            }
        case .lost:
            fix = nil
        case .ignore:
            break
        }
        reports += 1
        return change
    }

    /// The system clock was found unset at start (its warning is logged by the caller): no later report warns
    /// again, and the clock counts as unsynchronised until a live fix says otherwise.
    public mutating func noteClockNotSet() {
        clockUnsynchronised = true
        clockWarned = true
    }
}
