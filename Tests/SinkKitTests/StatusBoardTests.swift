import BridgeCore
import Foundation
import Platform
import SinkKit
import Testing

/// The one status every publisher reads (`StatusBoard`), with a builder thread as the status reporter runs one:
/// readers that must not show an older state wait for a build that began after they asked; parts' requests fold
/// into builds; closing ends the builder and the readers' waits.
@Suite struct StatusBoardTests {
    /// A builder like the reporter's: each build publishes `{"build": n}`, after `work` seconds.
    final class Builder: Sendable {
        let board = StatusBoard()
        let builds = Monitor(0)

        init(period: Double, work: Double = 0) {
            let board = self.board
            let builds = self.builds
            let thread = Thread {
                repeat {
                    _ = board.beginBuild()
                    Thread.sleep(forTimeInterval: work)
                    let n = builds.withLock { $0 } + 1
                    board.publish(status: .object([("build", .integer(n))]), metrics: "m \(n)", device: .null)
                    builds.update { $0 = n }
                } while board.waitForNextBuild(period: period)
                builds.update { $0 = -1 }
            }
            thread.start()
        }
    }

    @Test func aFreshReaderSeesABuildThatBeganAfterItAsked() {
        let builder = Builder(period: 3600, work: 0.05)
        defer { builder.board.close() }
        #expect(builder.builds.wait(until: MonotonicClock.deadline(after: 10)) { $0 == 1 })
        // Nothing asked: no build for an hour; a fresh reader gets build 2, not the 1 that stood when it asked.
        let fresh = builder.board.fresh(within: 10, metrics: true)
        #expect(fresh.status["build"] == .integer(2) && fresh.metrics == "m 2", "\(fresh.status)")
        #expect(builder.board.status()["build"] == .integer(2))
    }

    @Test func changesFoldIntoBuildsAndSoonOnesWaitTheirGap() {
        let builder = Builder(period: 3600, work: 0.05)
        defer { builder.board.close() }
        #expect(builder.builds.wait(until: MonotonicClock.deadline(after: 10)) { $0 == 1 })
        // A burst of 100 changes costs at most two builds (each takes 50 ms), not 100.
        for _ in 0..<100 { builder.board.changed() }
        #expect(builder.builds.wait(until: MonotonicClock.deadline(after: 10)) { $0 >= 2 })
        Thread.sleep(forTimeInterval: 0.3)
        let afterBurst = builder.builds.withLock { $0 }
        #expect(afterBurst <= 3, "\(afterBurst) builds for one burst")
        // Deliveries: a build within the gap (0.5 s) of the last, one for the lot.
        let before = MonotonicClock.now()
        for _ in 0..<50 { builder.board.changedSoon(within: 0.5) }
        #expect(builder.builds.wait(until: MonotonicClock.deadline(after: 10)) { $0 == afterBurst + 1 })
        Thread.sleep(forTimeInterval: 0.7)
        #expect(builder.builds.withLock { $0 } == afterBurst + 1)
        #expect(MonotonicClock.now() - before >= 0.5)
    }

    @Test func closingEndsTheBuilderAndReadersDoNotWait() {
        let builder = Builder(period: 3600)
        #expect(builder.builds.wait(until: MonotonicClock.deadline(after: 10)) { $0 == 1 })
        builder.board.close()
        #expect(builder.builds.wait(until: MonotonicClock.deadline(after: 10)) { $0 == -1 })
        let start = MonotonicClock.now()
        _ = builder.board.fresh(within: 5)
        #expect(MonotonicClock.now() - start < 1, "no builder runs: nothing to wait for")
    }

    @Test func aSinksDeviceStatusCarriesItsOwnBacklogBesidePending() {
        let board = StatusBoard()
        #expect(board.device(sinkPending: 3) == .null, "nothing built yet")
        board.publish(
            status: .null, metrics: nil,
            device: .object([
                ("version", .string("1")),
                ("spool", .object([("pending", .integer(5)), ("damaged", .integer(0))])),
            ]))
        #expect(
            board.device(sinkPending: 3).encoded()
                == #"{"version":"1","spool":{"pending":5,"unpublished":3,"damaged":0}}"#)
    }
}
