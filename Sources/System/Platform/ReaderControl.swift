/// What a device source and its reader thread share to start and stop it: whether it started, the stop request,
/// and the pipe that wakes the thread's `poll()` (for a stop, or for work handed over). A source keeps one beside
/// its `ReaderThread`; the loop polls `wakePipe` and ends once `isStopping`.
public final class ReaderControl: Sendable {
    private let flags = Mutex((started: false, stopping: false))
    /// Nil when no pipe could be made: the loop then wakes every 200 ms (`pollTimeout`).
    public let wakePipe = WakePipe()

    public init() {}

    /// True the first time only: the caller starts the thread.
    public func markStarted() -> Bool {
        flags.withLock { flags in
            defer { flags.started = true }
            return !flags.started
        }
    }

    /// Asks the thread to stop; true when it was running (the caller then waits for it).
    public func requestStop() -> Bool {
        let running = flags.withLock { flags -> Bool in
            let running = flags.started && !flags.stopping
            flags.stopping = true
            return running
        }
        if running { wakePipe?.signal() }
        return running
    }

    public var isStopping: Bool { flags.withLock { $0.stopping } }

    /// The `poll()` timeout in milliseconds until `deadline` (monotonic seconds; infinity: none): -1 to sleep until
    /// something happens, at most a minute, and at most 200 ms when there is no wake pipe.
    public func pollTimeout(until deadline: Double, now: Double) -> Int32 {
        let nearest = wakePipe == nil ? min(deadline, now + 0.2) : deadline
        guard nearest.isFinite else { return -1 }
        return Int32(max(0, min(60_000, ((nearest - now) * 1000).rounded(.up))))
    }
}
