import BridgeCore
import CGPSShim
import Foundation
import Glibc
import Logging
import Platform

/// What `plings-bridge gps` shows: the connection and the last fix, with its age.
public struct GPSStatus: Sendable, Equatable {
    public var connected: Bool
    /// Mode of the last TPV (0 not seen, 1 no fix, 2 2D, 3 3D); nil before any TPV.
    public var mode: Int?
    /// The last accepted fix (fresh or not; `fixAge` says how old).
    public var latitude: Double?
    public var longitude: Double?
    public var accuracy: Double?
    /// Seconds since the last accepted fix was received.
    public var fixAge: Double?
    /// True when `currentFix()` would attach the fix to a read now.
    public var fresh: Bool
    public var satellitesUsed: Int?
    public var satellitesVisible: Int?
    /// System clock minus GPS time in seconds (positive: the system clock is ahead); nil without a live fix.
    public var clockOffset: Double?
    /// True when the system clock was found unsynchronised (year < 2024, or > 5 s from a live fix).
    public var clockUnsynchronised: Bool
    /// Why the last connection attempt or connection failed.
    public var lastError: String?
}

/// The gpsd client: one connection on its own thread, blocking in recv(2) on the socket (no polling), and the
/// latest fix cached for the read path.
///
/// `currentFix()` is a Mutex-protected read of that cache, never I/O: it sits on every read. The
/// thread reconnects with backoff (0.5 s doubling to 30 s) when gpsd is absent, killed or restarted, and logs one
/// line per state change (connected, lost, waiting), never one per attempt.
public final class GPSClient: Service, FixProvider, Sendable {
    /// A connection handle; only the client thread opens and closes it, `stop()` only interrupts it.
    private final class Connection: @unchecked Sendable {
        // The pointer is immutable; `plings_gps_interrupt` (shutdown(2)) is safe from any thread while the
        // connection is open, and the client clears `State.connection` under the lock before closing it.
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
    }

    private enum LinkState: Equatable { case none, connected, lost, waiting }

    private struct State {
        var started = false
        var stopping = false
        var connection: Connection?
        var connected = false
        /// Connection attempts that ended (in success or failure): `waitForFirstReport` needs one.
        var attempts = 0
        var lastAttemptFailed = false
        /// What gpsd's reports said (fix, mode, satellites, clock check).
        var gps: GPSFixState
        var lastError: String?
        var link = LinkState.none
    }

    public let name = "gpsd"
    public let config: BridgeConfig.Location
    private let address: GPSDAddress?
    private let policy: FixPolicy
    private let logger: Logger
    /// The one lock and the one wait: every wait (first report, live fix, backoff sleep, the end of the
    /// thread in `stop`) is a predicate on this state on the monotonic clock, and every change a waiter cares
    /// about is made through `update`, which wakes them.
    private let state: Monitor<State>
    /// The connection thread (`WorkerThread`: joinable, and an end nobody asked for is reported).
    private let worker = Mutex<WorkerThread?>(nil)

    static let initialBackoff = 0.5
    static let maxBackoff = 30.0

    public init(config: BridgeConfig.Location, logger: Logger) {
        self.config = config
        self.address = GPSDAddress.parse(config.gpsd)
        self.policy = FixPolicy(maxFixAge: config.maxFixAge, minMode: config.minMode)
        self.logger = logger
        self.state = Monitor(State(gps: GPSFixState(policy: policy)))
    }

    /// Starts the connection thread (once; a stopped client is not restarted: make a new one). SIGPIPE is ignored
    /// process-wide first: writing to a gpsd that just died would otherwise kill the process. (Same call as
    /// `SignalStream.ignoreSIGPIPE()`, which lives in `Bridge`, a module this one must not depend on.)
    public func start() {
        let first = state.withLock { s -> Bool in
            if s.started { return false }
            s.started = true
            return true
        }
        guard first else { return }
        Glibc.signal(SIGPIPE, SIG_IGN)
        let now = Date().timeIntervalSince1970
        if ClockCheck.isBeforeMinYear(systemNow: now) {
            state.withLock { $0.gps.noteClockNotSet() }
            logger.warn(
                "system clock is not set (year before \(ClockCheck.minYear))",
                [("systemTime", Timestamp.format(Date())), ("timeFromGPS", String(config.timeFromGPS))])
        }
        guard let address else {
            state.update {
                $0.lastError = "location.gpsd is not HOST:PORT: \(config.gpsd)"
                $0.attempts = 1
                $0.lastAttemptFailed = true
            }
            logger.error("location.gpsd is not HOST:PORT; no GPS", [("gpsd", config.gpsd)])
            return
        }
        let started = WorkerThread(name: "gpsd", watched: true) { [self] in run(address) }
        worker.withLock { $0 = started }
    }

    /// Stops the thread: interrupts a blocked read with shutdown(2) and wakes a backoff sleep. Returns within
    /// about 1 s even if the thread is stuck in a slow connect (it then exits on its own).
    public func stop() { stop(deadline: MonotonicClock.deadline(after: 1)) }

    /// `stop()`, returning by the monotonic `deadline` at the latest.
    public func stop(deadline: Double) {
        worker.withLock { $0 }?.expectEnd()
        state.update { s in
            s.stopping = true
            if let connection = s.connection { plings_gps_interrupt(connection.pointer) }
        }
        worker.withLock { $0 }?.join(until: min(deadline, MonotonicClock.deadline(after: 1)))
    }

    // MARK: the read path

    /// The fix fresh now, or nil: a cached read under a lock, never I/O.
    public func currentFix() -> LocationFix? {
        let monotonic = MonotonicClock.now()
        return state.withLock { s -> LocationFix? in
            guard let fix = s.gps.fix, policy.isFresh(fix, monotonicNow: monotonic) else { return nil }
            let location = fix.locationFix
            return location.isValid ? location : nil
        }
    }

    /// The time to stamp a read with: `now` (the system clock), or, when `location.timeFromGPS` is on and the
    /// clock was found unsynchronised, the last live fix's GPS time plus the monotonic time since it arrived.
    public func readTime(now: Date) -> Date {
        guard config.timeFromGPS else { return now }
        let monotonic = MonotonicClock.now()
        let recent = state.withLock { s -> GPSFix? in
            guard let fix = s.gps.liveFix, policy.age(of: fix, monotonicNow: monotonic) < policy.maxFixAge else {
                return nil
            }
            return fix
        }
        let system = now.timeIntervalSince1970
        let seconds = ClockCheck.readTime(
            systemNow: system, recentFix: recent, monotonicNow: monotonic, timeFromGPS: true)
        // `now` itself when the system clock stands: a Date rebuilt from 1970-based seconds is not bit-identical.
        return seconds == system ? now : Date(timeIntervalSince1970: seconds)
    }

    /// A snapshot for `plings-bridge gps` and `doctor`.
    public func status() -> GPSStatus {
        let monotonic = MonotonicClock.now()
        let system = Self.systemNow()
        return state.withLock { s in
            let gps = s.gps
            var offset: Double?
            if let live = gps.liveFix, policy.age(of: live, monotonicNow: monotonic) < policy.maxFixAge {
                offset = ClockCheck.offset(systemNow: system, fix: live, monotonicNow: monotonic)
            }
            let fresh = gps.fix.map { policy.isFresh($0, monotonicNow: monotonic) } ?? false
            return GPSStatus(
                connected: s.connected, mode: gps.lastMode, latitude: gps.fix?.latitude,
                longitude: gps.fix?.longitude, accuracy: gps.fix?.accuracy,
                fixAge: gps.fix.map { policy.age(of: $0, monotonicNow: monotonic) }, fresh: fresh,
                satellitesUsed: gps.satellitesUsed, satellitesVisible: gps.satellitesVisible, clockOffset: offset,
                clockUnsynchronised: gps.clockUnsynchronised, lastError: s.lastError)
        }
    }

    /// Waits up to `timeout` seconds for gpsd's first report (a TPV or a POLL answer); for one-shot commands.
    /// Returns false at once when the first connection attempt failed (a refused connection costs no wait).
    @discardableResult
    public func waitForFirstReport(timeout: Double) -> Bool {
        waitFor(timeout: timeout) { $0.gps.reports > 0 }
    }

    /// Waits up to `timeout` seconds for a live fix (a streamed TPV, not gpsd's replayed cache); true when one is
    /// held. A one-shot `scan` uses only such a fix: gpsd's `?POLL` answer repeats the last fix for as long as
    /// the receiver is silent. Returns false at once when the first connection attempt failed.
    @discardableResult
    public func waitForLiveFix(timeout: Double) -> Bool {
        waitFor(timeout: timeout) { $0.gps.liveFix != nil }
    }

    /// Waits until `done` holds, the connection fails or stops, or `timeout` seconds pass (monotonic).
    private func waitFor(timeout: Double, _ done: (State) -> Bool) -> Bool {
        var reached = false
        state.wait(until: MonotonicClock.deadline(after: timeout)) { s in
            reached = done(s)
            return reached || (s.attempts > 0 && s.lastAttemptFailed && !s.connected) || s.stopping
        }
        return reached
    }

    // MARK: the connection thread

    private var isStopping: Bool { state.withLock { $0.stopping } }

    /// Logs a state change once: repeated failures while already waiting log nothing.
    private func transition(to link: LinkState, _ level: LogLevel, _ message: String, _ fields: [(String, String)]) {
        let changed = state.withLock { s -> Bool in
            guard s.link != link else { return false }
            s.link = link
            return true
        }
        if changed { logger.log(level, message, fields) }
    }

    private func run(_ address: GPSDAddress) {
        var backoff = Self.initialBackoff
        let endpoint = "\(address.host):\(address.port)"
        func waitBeforeRetrying() {
            sleep(backoff)
            backoff = min(backoff * 2, Self.maxBackoff)
        }
        /// Records one connection attempt's outcome (nil error: connected) for `status` and `doctor`.
        func noteAttempt(error: String?) {
            state.update {
                $0.attempts += 1
                $0.lastAttemptFailed = error != nil
                $0.connected = error == nil
                $0.lastError = error
            }
        }
        func failed(_ why: String) {
            noteAttempt(error: why)
            transition(
                to: .waiting, .warn, "gpsd not reachable; retrying with backoff", [("gpsd", endpoint), ("error", why)])
            waitBeforeRetrying()
        }
        while !isStopping {
            var code: Int32 = 0
            // Connecting and reading wait on gpsd: the watchdog does not count them as work.
            guard let pointer = WorkerActivity.waiting({ plings_gps_open(address.host, address.port, &code) }) else {
                failed(String(cString: plings_gps_error_string(code)))
                continue
            }
            let connection = Connection(pointer)
            let proceed = state.withLock { s -> Bool in
                guard !s.stopping else { return false }
                s.connection = connection
                return true
            }
            guard proceed else {
                plings_gps_close(pointer)
                break
            }
            if plings_gps_watch(pointer) != 0 || plings_gps_poll(pointer) != 0 {
                let why = "could not start the watch: " + String(cString: strerror(errno))
                close(connection, error: why)
                failed(why)
                continue
            }
            noteAttempt(error: nil)
            transition(to: .connected, .info, "connected to gpsd", [("gpsd", endpoint)])
            let (why, reports) = readLoop(connection)
            close(connection, error: why)
            if isStopping { break }
            // Only a connection that delivered something resets the backoff: a gpsd that accepts and drops at once
            // (the ECONNRESET race right after a kill, or a crash loop) must not be hammered every 0.5 s.
            if reports > 0 { backoff = Self.initialBackoff }
            // gpsd going away (killed, restarted, reset right after a kill) is EOF or ECONNRESET: reconnect.
            transition(
                to: .lost, .warn, "lost the connection to gpsd; reconnecting", [("gpsd", endpoint), ("error", why)])
            waitBeforeRetrying()
        }
    }

    private func close(_ connection: Connection, error: String?) {
        state.update {
            $0.connection = nil
            $0.connected = false
            if let error { $0.lastError = error }
        }
        plings_gps_close(connection.pointer)
    }

    /// Reads until the connection ends; returns why, and how many messages arrived.
    private func readLoop(_ connection: Connection) -> (String, Int) {
        var raw = plings_gps_report()
        var empty = 0
        var messages = 0
        while true {
            let status = WorkerActivity.waiting { plings_gps_read(connection.pointer, &raw) }
            if status < 0 {
                let number = errno
                return (number == 0 ? "end of stream" : String(cString: strerror(number)), messages)
            }
            if status == 0 {
                // A partial line; a stream that only ever yields these is broken (guards against a busy loop).
                empty += 1
                if empty > 10_000 { return ("gpsd sent no complete message", messages) }
                continue
            }
            empty = 0
            messages += 1
            let report = GPSReport.validate(
                kind: raw.kind, flags: raw.flags, mode: raw.mode, latitude: raw.latitude, longitude: raw.longitude,
                eph: raw.eph, epx: raw.epx, epy: raw.epy, time: raw.time, satellitesUsed: raw.satellites_used,
                satellitesVisible: raw.satellites_visible)
            apply(report, receivedAt: MonotonicClock.now())
        }
    }

    /// Folds one report into the cache (`GPSFixState`); logs a clock problem the first time it is seen.
    func apply(_ report: GPSReport, receivedAt: Double) {
        let system = Self.systemNow()
        // Through `update`: waiters for a first report or a live fix re-check.
        let change = state.update { $0.gps.apply(report, receivedAt: receivedAt, systemNow: system) }
        if let offset = change.clockWarning {
            logger.warn(
                "system clock disagrees with GPS time; is NTP running?",
                [
                    ("offset", String(format: "%.3f", offset)), ("limit", String(ClockCheck.maxOffset)),
                    ("timeFromGPS", String(config.timeFromGPS)),
                ])
        }
    }

    /// Sleeps up to `seconds` (monotonic), waking early on `stop()`.
    private func sleep(_ seconds: Double) {
        state.wait(until: MonotonicClock.deadline(after: seconds)) { $0.stopping }
    }

    // MARK: clocks

    static func systemNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
