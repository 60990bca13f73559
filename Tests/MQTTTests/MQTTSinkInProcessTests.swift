import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import MQTT
import Platform
import SinkKit
import Spool
import Testing

/// The MQTT sink (the queue sink runner with the broker session) in this process against a real Mosquitto: its
/// health (the `SinkHealth` every sink shares) goes
/// from starting to publishing on the broker's CONNACK, to failing when the broker goes away, and back; each
/// change is told once, and what was queued meanwhile is published.
@Suite(.serialized)
struct MQTTSinkInProcessTests {
    @Test func healthFollowsTheBrokerAndEachChangeIsToldOnce() throws {
        let broker = try MosquittoRig()
        let dir = TemporaryDirectory("mqtt-inproc")
        defer {
            broker.kill()
            dir.remove()
        }
        let spool = try Spool(path: dir.file("spool.sqlite"))
        let settings = MQTTSettings(
            host: "127.0.0.1", port: broker.port, tls: false, caFile: nil, certFile: nil, keyFile: nil, username: nil,
            password: nil, topicBase: "plings/test/inproc", deviceID: "inproc", keepalive: 10, maxInflight: 10)
        let changes = Monitor(0)
        let recorded = Monitor(0)
        try spool.registerSink(QueuedSinkKind.mqtt.name)
        let made = QueuedSink(
            .mqtt, settings: settings, spool: spool, logger: Logger(minimum: .error),
            healthChanged: { changes.update { $0 += 1 } }, delivered: { recorded.update { $0 += 1 } })
        let sink = try #require(made)
        #expect(sink.currentHealth == .starting)
        sink.start()
        defer { sink.stop(timeout: 2) }
        #expect(changes.wait(until: MonotonicClock.deadline(after: 10)) { $0 >= 1 })
        #expect(sink.currentHealth == .healthy)

        broker.kill()
        #expect(changes.wait(until: MonotonicClock.deadline(after: 10)) { $0 >= 2 })
        guard case .failing(let reason, _) = sink.currentHealth else {
            Issue.record("not failing: \(sink.currentHealth)")
            return
        }
        #expect(!reason.isEmpty)
        // Committed while the broker is away: queued for the sink, published once it is back.
        let read = Read(
            sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=Mq&p=1", time: Date())
        try spool.insert([ScanBuilder(parser: PlingsURLParser()).build(read, fix: nil)])
        sink.wake()
        try broker.start()
        #expect(changes.wait(until: MonotonicClock.deadline(after: 40)) { $0 >= 3 })
        #expect(sink.currentHealth == .healthy)
        // The acknowledgement recorded in the spool (the sink tells it through `delivered`).
        #expect(recorded.wait(until: MonotonicClock.deadline(after: 10)) { $0 >= 1 })
        #expect(sink.currentStats.delivered == 1)
        // Failing is one change however many reconnects failed; so is its end.
        #expect(changes.withLock { $0 } == 3)
    }
}
