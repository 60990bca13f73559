import BridgeCore
import BridgeTestSupport
import PlingsAPI
import Foundation
import Logging
import SinkKit
import Platform
import Spool
import Testing

/// The forwarder in this process, against the real API stand-in and a real spool: its health (the `SinkHealth`
/// every sink shares) follows the outcomes of docs/contracts.md, "Outcomes", and each change is told once.
@Suite(.serialized)
struct PlingsAPIInProcessTests {
    struct Rig {
        let api: APIStandIn
        let dir: TemporaryDirectory
        let spool: Spool
        let changes = Monitor(0)
        /// Outcomes recorded in the spool, as the forwarder tells them (`delivered`).
        let recorded = Monitor(0)

        init(scans identifiers: [String]) throws {
            api = try APIStandIn()
            dir = TemporaryDirectory("fwd-inproc")
            spool = try Spool(path: dir.file("spool.sqlite"))
            for identifier in identifiers { try commit(identifier) }
        }

        func settings(timeout: Double = 5) -> APISettings {
            APISettings(
                url: api.url, token: api.token, document: GraphQLRequestBody.defaultDocument, timeout: timeout,
                concurrency: 1, allowInsecureHTTP: true, userAgent: "plings-bridge-test")
        }

        func forwarder(timeout: Double = 5) throws -> QueuedSink<APISettings> {
            let (changes, recorded) = (self.changes, self.recorded)
            guard
                let sink = QueuedSink(
                    .api, settings: settings(timeout: timeout), spool: spool, logger: Logger(minimum: .error),
                    healthChanged: { changes.update { $0 += 1 } }, delivered: { recorded.update { $0 += 1 } })
            else { throw RigError("no HTTP client for the API sink") }
            return sink
        }

        /// Commits one more scan, as the pipeline does.
        func commit(_ identifier: String) throws {
            let read = Read(
                sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1", time: Date())
            try spool.insert([ScanBuilder(parser: PlingsURLParser()).build(read, fix: nil)])
        }

        func delivered() throws -> Int { try spool.stats().counts[.delivered] ?? 0 }

        /// Waits (bounded) until `count` scans are delivered, looking each time the forwarder recorded an outcome.
        func awaitDelivered(_ count: Int, timeout: Double) -> Bool {
            let deadline = MonotonicClock.deadline(after: timeout)
            var seen = 0
            while (try? delivered()) != count {
                let last = seen
                guard recorded.wait(until: deadline, for: { $0 > last }) else { return (try? delivered()) == count }
                seen = recorded.withLock { $0 }
            }
            return true
        }

        func teardown() {
            api.stop()
            dir.remove()
        }
    }

    /// Two 503s, then the API answers: failing once, resumed once, and every scan delivered.
    @Test func aFailingEpisodeIsToldOnceAndEndsWithTheFirstSuccess() throws {
        let rig = try Rig(scans: ["Fa", "Fb", "Fc"])
        defer { rig.teardown() }
        try rig.api.setMode("503", ["count": 2])
        let forwarder = try rig.forwarder()
        forwarder.start()
        defer { forwarder.stop(timeout: 3) }
        #expect(rig.changes.wait(until: MonotonicClock.deadline(after: 10)) { $0 >= 2 })
        #expect(rig.awaitDelivered(3, timeout: 10))
        #expect(forwarder.currentHealth == .healthy)
        #expect(rig.changes.withLock { $0 } == 2)
        let stats = forwarder.currentStats
        #expect(stats.failures == 2 && stats.delivered == 3)
    }

    /// A refused token pauses delivery (one change), nothing is sent meanwhile, and a reload ends the pause at
    /// once (another change); the scans then go.
    @Test func aRefusedTokenPausesUntilAReload() throws {
        let rig = try Rig(scans: ["Pa", "Pb"])
        defer { rig.teardown() }
        try rig.api.setMode("401")
        let forwarder = try rig.forwarder()
        forwarder.start()
        defer { forwarder.stop(timeout: 3) }
        #expect(rig.changes.wait(until: MonotonicClock.deadline(after: 10)) { $0 >= 1 })
        guard case .paused(let reason, _) = forwarder.currentHealth else {
            Issue.record("not paused: \(forwarder.currentHealth)")
            return
        }
        #expect(reason.contains("401"))
        // Paused: the one refused request and no other.
        #expect(try rig.api.requests(min: 2, wait: 1).count == 1)
        try rig.api.setMode("ok")
        #expect(forwarder.update(rig.settings()))
        #expect(rig.changes.withLock { $0 } == 2)
        #expect(rig.awaitDelivered(2, timeout: 10))
        #expect(forwarder.currentHealth == .healthy)
    }

    /// While failing, the probe the backoff let through is in flight and scans keep being committed: the
    /// coordinator waits for the probe's outcome instead of looking again at each commit's wake-up. It once spun
    /// through the whole probe (4 s of CPU in the soak, behind a slow API). The measure is the kernel's count of
    /// the CPU time of the coordinator thread ("api"), over the probe: a wait uses none of it.
    @Test func aProbeInFlightIsAwaitedWithoutSpinning() throws {
        let rig = try Rig(scans: ["Sa"])
        defer { rig.teardown() }
        // Every answer comes 5 s late, after the 3 s timeout: the first attempt fails, so does the probe.
        try rig.api.setMode("slow", ["delay": 5])
        let forwarder = try rig.forwarder(timeout: 3)
        forwarder.start()
        defer { forwarder.stop(timeout: 3) }
        // The second request is the backoff's probe: in flight from its arrival until the timeout.
        #expect(try rig.api.requests(min: 2, wait: 15).count >= 2)
        let outcomes = rig.recorded.withLock { $0 }
        let before = CPUTime.ticks(ofThreadsNamed: "api")
        for identifier in ["Sb", "Sc", "Sd"] {
            try rig.commit(identifier)
            forwarder.wake()
        }
        #expect(rig.recorded.wait(until: MonotonicClock.deadline(after: 15)) { $0 > outcomes })
        let used = CPUTime.ticks(ofThreadsNamed: "api") - before
        // The probe was in flight for most of its 3 s timeout; spinning used about all of it (~250 ticks).
        #expect(used < 20, "the coordinator used \(used) clock ticks while the probe was in flight")
        #expect(forwarder.currentHealth != .healthy)
    }
}
