/// Jobs done one at a time, in order, on a worker thread of their own (`WorkerThread`), so whoever hands a job in
/// never waits for it: the NFC readers' beeps and LEDs, the keys `hid.passThrough` re-types. The worker's loop is
/// the part's own (`while let job = queue.next() { ... }`), so what it keeps between jobs (a PC/SC context, a
/// virtual keyboard) stays on its thread.
public final class JobQueue<Job: Sendable>: Sendable {
    private struct State: Sendable {
        var jobs: [Job] = []
        var stopping = false
    }

    private let state = Monitor(State())
    private let worker = Mutex<WorkerThread?>(nil)

    public init() {}

    /// Starts the worker thread called `name` running `loop` (once; a second call does nothing).
    public func start(name: String, _ loop: @escaping @Sendable () -> Void) {
        worker.withLock { running in
            guard running == nil else { return }
            running = WorkerThread(name: name, loop)
        }
    }

    /// Queues a job (dropped once the queue is stopping: its part is going away).
    public func enqueue(_ job: Job) {
        state.update { s in
            guard !s.stopping else { return }
            s.jobs.append(job)
        }
    }

    /// For the worker: the next job, waiting for one; nil once the queue is stopping.
    public func next() -> Job? {
        var next: Job?
        state.wait { s in
            if s.stopping { return true }
            guard !s.jobs.isEmpty else { return false }
            next = s.jobs.removeFirst()
            return true
        }
        return next
    }

    /// For the worker: waits `seconds` (monotonic) unless the queue is stopping; true when it is (the job in
    /// progress should end now).
    public func pause(_ seconds: Double) -> Bool {
        state.wait(until: MonotonicClock.deadline(after: seconds)) { $0.stopping }
    }

    /// Ends the worker after the job in progress (queued jobs are dropped) and waits until `deadline` at most;
    /// true when it ended (or never started).
    @discardableResult
    public func stop(deadline: Double) -> Bool {
        let running = worker.withLock { $0 }
        running?.expectEnd()
        state.update { s in
            s.stopping = true
            s.jobs = []
        }
        return running?.join(until: deadline) ?? true
    }
}
