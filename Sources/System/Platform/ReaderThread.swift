import Foundation

/// A device source's reader thread (a `WorkerThread`): started once, with a bounded wait until it has attached the
/// devices present at start, and a wait for its end by a deadline. The loop itself (a `poll()` over the devices) and
/// how it is told to stop (a flag and a `WakePipe`) are the source's; it calls `expectEnd()` before telling it.
public final class ReaderThread: Sendable {
    private let name: String
    private let progress = Monitor(false)
    private let worker = Mutex<WorkerThread?>(nil)

    public init(name: String) { self.name = name }

    /// Runs `body` on a new thread and waits up to `readyWithin` seconds for it to call its `ready` argument (or to
    /// return). Blocking: call it from a source's `start`, which runs on a thread of its own.
    public func start(
        readyWithin: Double, _ body: @escaping @Sendable (_ ready: @escaping @Sendable () -> Void) -> Void
    ) {
        let progress = self.progress
        // Watched: every device loop marks its `poll()` as its wait (`WorkerActivity.waiting`).
        let started = WorkerThread(name: name, watched: true) {
            body { progress.update { $0 = true } }
            progress.update { $0 = true }
        }
        worker.withLock { $0 = started }
        progress.wait(until: MonotonicClock.deadline(after: readyWithin)) { $0 }
    }

    /// The source is about to tell the loop to stop: its end is expected from now on.
    public func expectEnd() { worker.withLock { $0 }?.expectEnd() }

    /// Waits until the thread's body has returned, or `deadline` (monotonic seconds) passed, and joins it; true when
    /// it ended.
    public func waitForEnd(until deadline: Double) -> Bool {
        guard let worker = worker.withLock({ $0 }) else { return true }
        return worker.join(until: deadline)
    }
}
