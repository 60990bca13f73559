import Platform
import Testing

/// The one thread shape (issue 38): a worker that ends although nobody asked it to is reported; one whose part said
/// it would end is not; a join honours its deadline.
@Suite(.serialized) struct WorkerThreadTests {
    /// Names reported while a test runs (the handler is process-wide: other suites' workers only ever end asked).
    static let reported = Monitor<[String]>([])

    init() {
        WorkerThread.onUnexpectedEnd { name in WorkerThreadTests.reported.update { $0.append(name) } }
    }

    @Test func aWorkerThatEndsOnItsOwnIsReportedByName() {
        let worker = WorkerThread(name: "test-dies") {}
        #expect(worker.join(until: MonotonicClock.deadline(after: 5)))
        #expect(Self.reported.wait(until: MonotonicClock.deadline(after: 5)) { $0.contains("test-dies") })
    }

    @Test func aWorkerAskedToEndIsNotReportedAndJoinHonoursItsDeadline() {
        let stop = Monitor(false)
        let worker = WorkerThread(name: "test-asked") { stop.wait { $0 } }
        // Still running: the join gives up at its deadline.
        let before = MonotonicClock.now()
        #expect(!worker.join(until: MonotonicClock.deadline(after: 0.2)))
        #expect(MonotonicClock.now() - before < 2)
        worker.expectEnd()
        stop.update { $0 = true }
        #expect(worker.join(until: MonotonicClock.deadline(after: 5)))
        #expect(!Self.reported.withLock { $0 }.contains("test-asked"))
    }

    @Test func aPoolReportsTheOneThatDiedAndJoinsTheRest() {
        let stop = Monitor(false)
        let pool = WorkerThreads()
        pool.start(name: "test-pool-live") { stop.wait { $0 } }
        pool.start(name: "test-pool-dies") {}
        #expect(Self.reported.wait(until: MonotonicClock.deadline(after: 5)) { $0.contains("test-pool-dies") })
        pool.expectEnd()
        stop.update { $0 = true }
        #expect(pool.join(until: MonotonicClock.deadline(after: 5)))
        #expect(!Self.reported.withLock { $0 }.contains("test-pool-live"))
    }
}
