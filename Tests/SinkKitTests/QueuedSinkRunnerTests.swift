import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import Platform
import SinkKit
import Spool
import Testing

/// The queued-sink runner over a real spool, with a scripted transport and no jitter (`random` 0: every backoff
/// wait is zero), so each test sees the runner's decisions and not the clock.
@Suite(.serialized)
struct QueuedSinkRunnerTests {
    /// A transport (and its one connection) whose answers come from `answer`, recording every request it was given.
    final class ScriptedTransport: QueuedSinkTransport, QueuedSinkConnection, Sendable {
        let batches = Monitor<[[String]]>([])
        let keys = Monitor<[String]>([])
        let cancelled = Monitor(false)
        let batchSize: Int
        let lease: Double = 30
        let answer: @Sendable (_ call: Int, _ ids: [String]) -> QueuedAnswer?

        init(batchSize: Int = 1, _ answer: @escaping @Sendable (_ call: Int, _ ids: [String]) -> QueuedAnswer?) {
            self.batchSize = batchSize
            self.answer = answer
        }

        func connect() -> (any QueuedSinkConnection)? { self }

        func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? {
            let ids = batch.records.map(\.id)
            keys.update { $0.append(batch.key) }
            let call = batches.update { b -> Int in
                b.append(ids)
                return b.count
            }
            return answer(call, ids)
        }

        func cancel() { cancelled.update { $0 = true } }
        var sent: [[String]] { batches.withLock { $0 } }
    }

    struct Rig {
        let dir = TemporaryDirectory("runner")
        let spool: Spool
        let ids: [String]
        let recorded = Monitor(0)
        let changes = Monitor(0)

        init(scans: Int) throws {
            spool = try Spool(path: dir.file("spool.sqlite"))
            try spool.registerSink("hook")
            let builder = ScanBuilder(parser: PlingsURLParser())
            var ids: [String] = []
            for n in 0..<scans {
                let read = Read(
                    sourceKind: .manual, device: "t",
                    raw: "https://s.plings.io/?t=q&i=Rn\(["a", "b", "c"][n % 3])&p=1.\(n)",
                    time: Date())
                let scan = builder.build(read, fix: nil)
                try spool.insert([scan])
                ids.append(scan.id)
            }
            self.ids = ids
        }

        func runner(_ transport: any QueuedSinkTransport) -> QueuedSinkRunner {
            let (recorded, changes) = (self.recorded, self.changes)
            return QueuedSinkRunner(
                name: "hook", sink: "hook", spool: spool, transport: transport, workers: 1, voice: .named("hook"),
                logger: Logger(minimum: .error),
                healthChanged: { changes.update { $0 += 1 } }, delivered: { recorded.update { $0 += 1 } },
                random: { 0 })
        }

        var stats: SinkStats? { try? spool.sinkStats(named: "hook") }

        /// Waits (bounded) until the queue holds no pending scan, looking each time an outcome was recorded.
        func awaitDrained(timeout: Double = 10) -> Bool {
            let deadline = MonotonicClock.deadline(after: timeout)
            while true {
                // Read before the queue, so an outcome recorded in between ends the wait at once.
                let seen = recorded.withLock { $0 }
                if stats?.pending == 0 { return true }
                guard recorded.wait(until: deadline, for: { $0 > seen }) else { return stats?.pending == 0 }
            }
        }
    }

    /// The scans alternate three identifiers: each request carries the first pending scan of each (docs/contracts.md,
    /// "Delivery order": a later scan of an identifier never overtakes an earlier one).
    @Test func everyScanGoesInCaptureOrderInBatches() throws {
        let rig = try Rig(scans: 7)
        defer { rig.dir.remove() }
        let transport = ScriptedTransport(batchSize: 3) { _, _ in .whole(.delivered(response: "")) }
        let runner = rig.runner(transport)
        runner.start()
        defer { runner.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.awaitDrained())
        #expect(transport.sent == [Array(rig.ids[0..<3]), Array(rig.ids[3..<6]), [rig.ids[6]]])
        #expect(rig.stats?.delivered == 7)
        #expect(runner.currentStats == .init(attempts: 7, delivered: 7, dead: 0, failures: 0))
    }

    /// A batch refused for good goes again one scan at a time: only the scan the receiver refuses alone is
    /// dead-lettered, the others are delivered, and order holds.
    @Test func aRefusedBatchIsSplitAndOnlyTheRefusedScanIsDead() throws {
        let rig = try Rig(scans: 5)
        defer { rig.dir.remove() }
        let bad = rig.ids[2]
        let transport = ScriptedTransport(batchSize: 4) { _, ids in
            .whole(ids.contains(bad) ? .dead(reason: "HTTP 422", response: "") : .delivered(response: ""))
        }
        let runner = rig.runner(transport)
        runner.start()
        defer { runner.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.awaitDrained())
        let sent = transport.sent
        // The heads of the three identifiers, refused as a whole; then each alone; then the rest.
        #expect(sent.prefix(4) == [Array(rig.ids[0..<3]), [rig.ids[0]], [rig.ids[1]], [rig.ids[2]]])
        #expect(sent.dropFirst(4).flatMap { $0 } == Array(rig.ids[3..<5]))
        #expect(rig.stats?.delivered == 4)
        #expect(rig.stats?.refused == 1)
        #expect(runner.currentStats.dead == 1)
    }

    /// A batch whose answer did not come is sent again as it was, under the same key (docs/contracts.md, "Batched
    /// request" and "Webhook request": a receiver de-duplicates by it), although newer scans were committed
    /// meanwhile and there is room for them in a batch: they go in later ones.
    @Test func aRepeatCarriesTheSameScansWhenNewerOnesCame() throws {
        let rig = try Rig(scans: 2)
        defer { rig.dir.remove() }
        let spool = rig.spool
        let newer = Monitor<[String]>([])
        let transport = ScriptedTransport(batchSize: 5) { call, _ in
            guard call == 1 else { return .whole(.delivered(response: "")) }
            // Committed while the first request was on its way, which then gets no answer.
            let builder = ScanBuilder(parser: PlingsURLParser())
            for n in 0..<3 {
                let scan = builder.build(
                    Read(sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=Rp&p=2.\(n)", time: Date()),
                    fix: nil)
                try? spool.insert([scan])
                newer.update { $0.append(scan.id) }
            }
            return .whole(.retry(reason: "timeout", retryAfter: nil))
        }
        let runner = rig.runner(transport)
        runner.start()
        defer { runner.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.awaitDrained())
        let added = newer.withLock { $0 }
        // The newer scans share one identifier: each goes once the one before it was delivered.
        #expect(transport.sent == [rig.ids, rig.ids] + added.map { [$0] })
        let keys = transport.keys.withLock { $0 }
        #expect(keys[0] == keys[1])
        #expect(rig.stats?.delivered == 5)
    }

    /// Two failures, then answers: one change to failing, one back, nothing lost, the same scans retried first.
    @Test func failuresAreRetriedInOrderAndToldOnce() throws {
        let rig = try Rig(scans: 2)
        defer { rig.dir.remove() }
        let transport = ScriptedTransport { call, _ in
            .whole(call <= 2 ? .retry(reason: "HTTP 503", retryAfter: nil) : .delivered(response: ""))
        }
        let runner = rig.runner(transport)
        runner.start()
        defer { runner.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.awaitDrained())
        #expect(transport.sent == [[rig.ids[0]], [rig.ids[0]], [rig.ids[0]], [rig.ids[1]]])
        #expect(rig.changes.withLock { $0 } == 2)
        #expect(runner.currentHealth == .healthy)
        #expect(runner.currentStats == .init(attempts: 4, delivered: 2, dead: 0, failures: 2))
        #expect(rig.stats?.lastError == nil)
    }

    /// A refusal only a person can fix pauses delivery: nothing more is sent until a reload resumes it.
    @Test func aPauseHoldsUntilResumed() throws {
        let rig = try Rig(scans: 2)
        defer { rig.dir.remove() }
        let transport = ScriptedTransport { call, _ in
            .whole(call == 1 ? .authPaused(reason: "HTTP 401") : .delivered(response: ""))
        }
        let runner = rig.runner(transport)
        runner.start()
        defer { runner.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.changes.wait(until: MonotonicClock.deadline(after: 5)) { $0 >= 1 })
        guard case .paused(let reason, _) = runner.currentHealth else {
            Issue.record("not paused: \(runner.currentHealth)")
            return
        }
        #expect(reason == "HTTP 401")
        runner.wake()
        #expect(!transport.batches.wait(until: MonotonicClock.deadline(after: 0.5)) { $0.count > 1 })
        #expect(rig.stats?.pending == 2)
        runner.resume()
        #expect(rig.awaitDrained())
        // The paused request went out too; the spool does not count it against its scan.
        #expect(runner.currentStats.attempts == 3)
        #expect(transport.sent == [[rig.ids[0]], [rig.ids[0]], [rig.ids[1]]])
    }

    /// Stopping gives the request in flight until a second before the deadline, then cancels it; its scan stays
    /// pending with no attempt recorded, and a new runner sends it at once (the lease was given back).
    @Test func stopAbandonsTheAttemptInFlightAndKeepsTheScan() throws {
        let rig = try Rig(scans: 1)
        defer { rig.dir.remove() }
        let slow = ScriptedTransport { _, _ in nil }
        let blocking = ScriptedTransport { _, _ in
            _ = slow.cancelled.wait(until: MonotonicClock.deadline(after: 30)) { $0 }
            return nil
        }
        let runner = QueuedSinkRunner(
            name: "hook", sink: "hook", spool: rig.spool, transport: Both(blocking, cancels: slow), workers: 1,
            voice: .named("hook"), logger: Logger(minimum: .error), random: { 0 })
        runner.start()
        #expect(blocking.batches.wait(until: MonotonicClock.deadline(after: 5)) { $0.count == 1 })
        let started = MonotonicClock.now()
        runner.stop(deadline: MonotonicClock.deadline(after: 1.5))
        #expect(MonotonicClock.now() - started < 1.5)
        #expect(slow.cancelled.withLock { $0 })
        #expect(rig.stats?.pending == 1)
        let next = rig.runner(ScriptedTransport { _, _ in .whole(.delivered(response: "")) })
        let restarted = MonotonicClock.now()
        next.start()
        defer { next.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.awaitDrained())
        #expect(MonotonicClock.now() - restarted < 5)
        #expect(next.currentStats.attempts == 1)
    }

    /// A connection whose requests `a` answers and whose cancel goes to `b`.
    final class Both: QueuedSinkTransport, QueuedSinkConnection, Sendable {
        let a: ScriptedTransport
        let b: ScriptedTransport
        init(_ a: ScriptedTransport, cancels b: ScriptedTransport) { (self.a, self.b) = (a, b) }
        let batchSize = 1
        let lease: Double = 30
        func connect() -> (any QueuedSinkConnection)? { self }
        func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? { a.deliver(batch) }
        func cancel() { b.cancel() }
    }

    /// A scan another process claimed and never answered (it died) is sent once its lease ends, with no commit
    /// to wake the runner.
    @Test func aScanLeasedByADeadProcessGoesWhenItsLeaseEnds() throws {
        let rig = try Rig(scans: 1)
        defer { rig.dir.remove() }
        let claimed = try rig.spool.ledger("hook").claimBatches(
            now: Date(), lease: 0.5, batches: 1, batchSize: 1, busy: [])
        #expect(claimed.count == 1)
        let transport = ScriptedTransport { _, _ in .whole(.delivered(response: "")) }
        let runner = rig.runner(transport)
        let started = MonotonicClock.now()
        runner.start()
        defer { runner.stop(deadline: MonotonicClock.deadline(after: 3)) }
        #expect(rig.awaitDrained())
        #expect(MonotonicClock.now() - started >= 0.4)
        #expect(transport.sent == [rig.ids])
    }
}
