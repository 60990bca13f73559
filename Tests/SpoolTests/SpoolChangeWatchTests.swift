import BridgeCore
import BridgeTestSupport
import Foundation
import Platform
import Testing

@testable import Spool

/// The service notices what other processes commit to the spool through inotify and SQLite's `data_version`,
/// with no periodic look: real SQLite files, a second `Spool` (its own connections, as another process has).
@Suite(.serialized)
struct SpoolChangeWatchTests {
    func scan(_ identifier: String) -> NewScan {
        ScanBuilder(parser: PlingsURLParser()).build(
            Read(sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1", time: Date()),
            fix: nil)
    }

    @Test func anotherWritersCommitIsNoticedAndNothingElseIs() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("s.sqlite")
        let service = try Spool(path: path)
        let other = try Spool(path: path)
        let notices = Monitor(0)
        let watch = SpoolChangeWatch(spool: service) { notices.update { $0 += 1 } }
        watch.start()
        defer { watch.stop(deadline: MonotonicClock.deadline(after: 2)) }

        // Quiet: nothing is looked at, nothing is reported.
        #expect(!notices.wait(until: MonotonicClock.deadline(after: 0.3)) { $0 > 0 })
        try other.insert([scan("A")])
        #expect(notices.wait(until: MonotonicClock.deadline(after: 5)) { $0 >= 1 })
        try other.insert([scan("B")])
        #expect(notices.wait(until: MonotonicClock.deadline(after: 5)) { $0 >= 2 })
        #expect(watch.changesNoticed == notices.withLock { $0 })

        // Another file written beside the spool wakes the thread but reports nothing.
        let before = notices.withLock { $0 }
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir.file("status.json")))
        #expect(!notices.wait(until: MonotonicClock.deadline(after: 0.5)) { $0 > before })
    }

    @Test func stopEndsTheWatchAtOnce() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let watch = SpoolChangeWatch(spool: try Spool(path: dir.file("s.sqlite"))) {}
        watch.start()
        let started = MonotonicClock.now()
        watch.stop(deadline: MonotonicClock.deadline(after: 2))
        #expect(MonotonicClock.now() - started < 1)
    }
}
