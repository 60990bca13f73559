import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import Platform
import SinkKit
import Spool
import Testing

/// The reload slot every delivering sink runs in, with a sink that records what the slot did to it, over a real
/// spool. What a reload must do is docs/operations.md's ("Reload"): the same settings reach the running sink (its
/// pause or backoff ends), changed ones replace it, a removed section stops it and stops queueing scans for it.
@Suite(.serialized)
struct SinkSlotTests {
    /// A sink that records its life: made for one setting, reloaded in place or stopped.
    final class RecordedSink: SlotSink {
        let setting: Int
        let events = Monitor<[String]>([])
        let stopDeadline = Monitor<Double?>(nil)

        init(setting: Int) { self.setting = setting }

        func wake() { events.update { $0.append("wake") } }
        func stop(deadline: Double) {
            stopDeadline.update { $0 = deadline }
            events.update { $0.append("stop") }
        }
        var log: [String] { events.withLock { $0 } }
    }

    struct Rig {
        let dir = TemporaryDirectory("slot")
        let spool: Spool
        let logPath: String
        let logger: Logger
        /// The setting the next `apply` reads (nil: the section is gone); `inPlace` is what the kind's reload says.
        let configured = Monitor<Int?>(1)
        let made = Monitor<[RecordedSink]>([])
        let reloads = Monitor<[Int]>([])

        init() throws {
            spool = try Spool(path: dir.file("spool.sqlite"))
            logPath = dir.file("log")
            let fd = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            logger = Logger(minimum: .info, fd: fd)
        }

        func slot(stopWithin: Double? = nil) -> SinkSlot<RecordedSink, Int> {
            let (configured, made, reloads) = (self.configured, self.made, self.reloads)
            let kind = SinkSlotKind<RecordedSink, Int>(
                name: "recorded", queue: "recorded",
                settings: { _ in configured.withLock { $0 } },
                make: { setting, context in
                    try? context.spool.registerSink("recorded")
                    let sink = RecordedSink(setting: setting)
                    made.update { $0.append(sink) }
                    return sink
                },
                reload: { _, current, new in
                    reloads.update { $0.append(new) }
                    return current == new
                },
                started: { ("recorded sink started", [("setting", String($0))]) },
                replaced: { ("recorded sink replaced", [("setting", String($0))]) },
                removed: "recorded: not configured; scans are no longer queued for it", stopWithin: stopWithin,
                status: { running, _ in running.map { .integer($0.settings) } ?? .null },
                metrics: { _, settings, _, m in m.add("recorded_setting", Double(settings), help: "the setting") })
            let context = SinkContext(
                spool: spool, logger: logger,
                configuration: SinkConfiguration(config: BridgeConfig(), apiToken: nil))
            return SinkSlot(kind, context: context)
        }

        func apply(_ slot: SinkSlot<RecordedSink, Int>, _ setting: Int?) {
            configured.update { $0 = setting }
            slot.apply(SinkConfiguration(config: BridgeConfig(), apiToken: nil))
        }

        var lines: [String] {
            ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        var queueEnabled: Bool? { (try? spool.sinkStats(named: "recorded"))?.enabled }
    }

    @Test func nothingIsMadeBeforeStartAndTheStartMakesOne() throws {
        let rig = try Rig()
        let slot = rig.slot()
        rig.apply(slot, 1)
        #expect(rig.made.withLock { $0 }.isEmpty)
        #expect(slot.statusEntry == .null)
        slot.start()
        #expect(rig.made.withLock { $0 }.map(\.setting) == [1])
        #expect(slot.statusEntry == .integer(1))
        #expect(rig.lines.filter { $0.contains("recorded sink started") }.count == 1)
        slot.wake()
        #expect(rig.made.withLock { $0 }[0].log == ["wake"])
        slot.stop(deadline: MonotonicClock.deadline(after: 2))
    }

    @Test func theSameSettingsReachTheRunningSinkAndChangedOnesReplaceIt() throws {
        let rig = try Rig()
        let slot = rig.slot()
        slot.start()
        rig.apply(slot, 1)
        // Taken in place: no new sink, nothing stopped, the kind's reload saw the settings.
        #expect(rig.made.withLock { $0 }.count == 1)
        #expect(rig.reloads.withLock { $0 } == [1])
        #expect(rig.made.withLock { $0 }[0].log.isEmpty)
        rig.apply(slot, 2)
        let made = rig.made.withLock { $0 }
        #expect(made.map(\.setting) == [1, 2])
        #expect(made[0].log == ["stop"])
        #expect(slot.running?.settings == 2)
        #expect(rig.lines.filter { $0.contains("recorded sink replaced") }.count == 1)
        var metrics = MetricsText()
        slot.addMetrics(to: &metrics)
        #expect(metrics.text.contains("recorded_setting 2"))
        slot.stop(deadline: MonotonicClock.deadline(after: 2))
        #expect(made[1].log == ["stop"])
        // Stopped: a reload starts nothing.
        rig.apply(slot, 3)
        #expect(rig.made.withLock { $0 }.count == 2)
    }

    @Test func aRemovedSectionStopsTheSinkAndItsQueueOnceAndAReturnResumesIt() throws {
        let rig = try Rig()
        let slot = rig.slot()
        slot.start()
        #expect(rig.queueEnabled == true)
        rig.apply(slot, nil)
        #expect(rig.made.withLock { $0 }[0].log == ["stop"])
        #expect(slot.running == nil)
        #expect(slot.statusEntry == .null)
        #expect(rig.queueEnabled == false)
        // Said once: a second reload without the section has nothing more to stop.
        rig.apply(slot, nil)
        #expect(rig.lines.filter { $0.contains("no longer queued") }.count == 1)
        rig.apply(slot, 1)
        #expect(rig.queueEnabled == true)
        #expect(rig.lines.filter { $0.contains("recorded sink started") }.count == 2)
        slot.stop(deadline: MonotonicClock.deadline(after: 2))
    }

    @Test func aSinksShareOfTheStopDeadlineIsLimited() throws {
        let rig = try Rig()
        let slot = rig.slot(stopWithin: 1)
        slot.start()
        let before = MonotonicClock.now()
        slot.stop(deadline: before + 4)
        let deadline = try #require(rig.made.withLock { $0 }[0].stopDeadline.withLock { $0 })
        #expect(deadline <= MonotonicClock.now() + 1 && deadline < before + 4)
    }
}
