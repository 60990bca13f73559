import Foundation

/// A worker of a part: the one thread shape under every loop of the service (sources' readers, sinks, the pipeline,
/// gpsd, periodic work). Named and joinable (`OwnThread`), and watched: when its body returns although its part
/// never said it would end (`expectEnd()`), that end is reported (`WorkerThread.onUnexpectedEnd`), so a part that dies
/// is never silent. The model is swift-service-lifecycle's `ServiceGroup`, which ends the group when a child task
/// returns on its own; here `run` stops the service with a non-zero exit naming the part, and systemd restarts it.
public final class WorkerThread: Sendable {
    public let name: String
    private struct State {
        var expected = false
        var finished = false
    }
    private let state = Monitor(State())
    private let thread = Mutex<OwnThread?>(nil)

    /// The longest a watched worker may work without passing through a wait before the watchdog calls it stuck:
    /// longer than any unit of work of theirs (the longest request timeout the configuration allows is 600 s).
    public static let watchLimit: Double = 900

    /// Starts `body` on a new thread called `name`. `watched`: the watchdog looks at whether it is stuck
    /// (`WorkerActivity`): only for a worker whose every wait for work is a `Monitor` wait or inside
    /// `WorkerActivity.waiting`, or one waiting elsewhere would look stuck.
    public init(name: String, watched: Bool = false, _ body: @escaping @Sendable () -> Void) {
        self.name = name
        let run = WorkerThread.testEnd(name: name, body)
        let state = self.state
        let limit = watched ? WorkerThread.testWatchLimit ?? WorkerThread.watchLimit : nil
        thread.withLock {
            $0 = OwnThread(name: name) {
                let activity = limit.map { WorkerActivity.begin(name: name, limit: $0) }
                run()
                activity?.end()
                let unexpected = state.update { s -> Bool in
                    s.finished = true
                    return !s.expected
                }
                if unexpected { WorkerThread.report(name) }
            }
        }
    }

    /// The part is about to tell the worker to end: its end from now on is expected. Call it before the signal to
    /// stop, so the end can never come first.
    public func expectEnd() {
        state.update { $0.expected = true }
    }

    /// Waits until the body has returned or `deadline` (monotonic seconds) passed, and joins the thread when it has
    /// returned; true when it did. A worker still running at the deadline is detached, left to end on its own.
    @discardableResult
    public func join(until deadline: Double) -> Bool {
        guard state.wait(until: deadline, for: { $0.finished }) else {
            thread.withLock { $0 }?.detach()
            return false
        }
        thread.withLock { $0 }?.join()
        return true
    }

    // MARK: - Where unexpected ends go

    private static let handler = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Sets what happens when a worker ends unasked (the service's run loop stops the service). Without a handler
    /// the end is written to stderr.
    public static func onUnexpectedEnd(_ handle: @escaping @Sendable (_ worker: String) -> Void) {
        handler.withLock { $0 = handle }
    }

    static func report(_ name: String) {
        if let handle = handler.withLock({ $0 }) {
            handle(name)
        } else {
            FileHandle.standardError.write(Data("level=error msg=\"worker ended unexpectedly\" worker=\(name)\n".utf8))
        }
    }

    /// The test seams (debug builds only, never in the package): `PLINGS_TEST_END_WORKER=NAME` makes the worker
    /// called NAME end at once, as a loop that died would, and `PLINGS_TEST_HANG_WORKER=NAME` makes it hang in a
    /// blocking call, so the tests can see each kind reported.
    private static func testEnd(name: String, _ body: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        #if DEBUG
            let environment = ProcessInfo.processInfo.environment
            if environment["PLINGS_TEST_END_WORKER"] == name { return {} }
            if environment["PLINGS_TEST_HANG_WORKER"] == name { return { while true { sleep(3600) } } }
        #endif
        return body
    }

    /// `PLINGS_TEST_WATCH_LIMIT=SECONDS` (debug builds only): a shorter `watchLimit`, so a test sees a hang soon.
    private static var testWatchLimit: Double? {
        #if DEBUG
            return ProcessInfo.processInfo.environment["PLINGS_TEST_WATCH_LIMIT"].flatMap(Double.init)
        #else
            return nil
        #endif
    }
}

/// The workers of one part (a queue sink's workers, a broker session's network and status threads), ended together.
public final class WorkerThreads: Sendable {
    private let workers = Mutex<[WorkerThread]>([])

    public init() {}

    /// Starts one more worker (`watched`: see `WorkerThread.init`).
    public func start(name: String, watched: Bool = false, _ body: @escaping @Sendable () -> Void) {
        let worker = WorkerThread(name: name, watched: watched, body)
        workers.withLock { $0.append(worker) }
    }

    /// Every worker's end from now on is expected (`WorkerThread.expectEnd`).
    public func expectEnd() {
        for worker in workers.withLock({ $0 }) { worker.expectEnd() }
    }

    /// Joins every worker that ends by `deadline`; true when all did. The ones joined are forgotten.
    @discardableResult
    public func join(until deadline: Double) -> Bool {
        let all = workers.withLock { $0 }
        let ended = all.filter { $0.join(until: deadline) }
        workers.withLock { held in held.removeAll { worker in ended.contains { $0 === worker } } }
        return ended.count == all.count
    }
}
