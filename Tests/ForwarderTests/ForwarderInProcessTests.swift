import BridgeCore
import BridgeTestSupport
import Forwarder
import Foundation
import Logging
import Platform
import Spool
import Testing

/// The forwarder in this process, against the real API stand-in and a real spool: its health (the `SinkHealth`
/// every sink shares) follows the outcomes of docs/contracts.md, "Outcomes", and each change is told once.
@Suite(.serialized)
struct ForwarderInProcessTests {
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
            let builder = ScanBuilder(parser: PlingsURLParser())
            for identifier in identifiers {
                let read = Read(
                    sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1",
                    time: Date())
                try spool.insert([builder.build(read, fix: nil)])
            }
        }

        func settings() -> APISettings {
            APISettings(
                url: api.url, token: api.token, document: GraphQLRequestBody.defaultDocument, timeout: 5,
                concurrency: 1, allowInsecureHTTP: true, userAgent: "plings-bridge-test")
        }

        func forwarder() -> Forwarder {
            let (changes, recorded) = (self.changes, self.recorded)
            return Forwarder(
                spool: spool, settings: settings(), logger: Logger(minimum: .error),
                healthChanged: { changes.update { $0 += 1 } }, delivered: { recorded.update { $0 += 1 } })
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
        let forwarder = rig.forwarder()
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
        let forwarder = rig.forwarder()
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
        forwarder.reload(settings: rig.settings())
        #expect(rig.changes.withLock { $0 } == 2)
        #expect(rig.awaitDelivered(2, timeout: 10))
        #expect(forwarder.currentHealth == .healthy)
    }
}
