import BridgeCore
import Foundation
import Platform
import Spool

/// The publisher: the spool's queued scans handed to libmosquitto in capture order, PUBACKs recorded in the spool,
/// the retained status message and Home Assistant's discovery kept current.
extension MQTTSink {
    // MARK: publisher thread

    /// What the publisher thread does next, decided under the lock and done outside it.
    enum Step {
        case record([Int])
        case read(after: Int)
        case publish([SinkItem])
        case status
        case wait(until: Double, ticks: Int)
        case stop
    }

    func publisherLoop(_ client: MQTTClient) {
        // How many scans libmosquitto holds at once. It puts at most `maxInflight` on the wire (its send maximum) and
        // sends the next held one from its own network thread as each PUBACK arrives; holding only the window would
        // make every message wait for this thread to wake and hand it over. A queue of a few windows keeps the wire
        // full without a hop, and stays short enough that the offline status sent at a clean stop, queued behind
        // it, is acknowledged well within the stop deadline. Order is libmosquitto's queue order, also across a
        // reconnect (see the type's comment).
        let holdLimit = settings.maxInflight * MQTTSink.queuedWindows
        // Acknowledged scans not yet recorded: written once libmosquitto holds its fill again, in batches.
        var toRecord: [Int] = []
        var recordFailing = false
        while true {
            recordHealth()
            let clock = MonotonicClock.now()
            let now = Date()
            let step: Step = state.withLock { s in
                if s.stopping { return .stop }
                if !s.acks.isEmpty { takeAcks(&s, into: &toRecord, now: now) }
                if s.health.isPaused, s.health.isOpen(at: clock) {
                    // The pause is over: start again from the oldest scan not acknowledged.
                    s.health.endPause(to: s.connected ? .healthy : .starting)
                    s.buffer.removeAll()
                    s.cursor = 0
                    s.wakeRequested = true
                }
                let paused = s.paused(at: clock)
                let canPublish =
                    s.connected && !paused && !s.holding && s.inFlight.count < holdLimit
                    && (s.wakeRequested || !s.buffer.isEmpty)
                // Refill what libmosquitto holds first, then record; a batch is written at the latest when nothing
                // is left to publish or 256 have gathered.
                if !toRecord.isEmpty, !canPublish || toRecord.count >= 256 {
                    defer { toRecord.removeAll() }
                    return .record(toRecord)
                }
                if s.connected, !paused, clock >= s.statusDue {
                    s.statusDue = .infinity
                    s.statusLooked = clock
                    return .status
                }
                if canPublish {
                    if s.buffer.isEmpty {
                        s.wakeRequested = false
                        return .read(after: s.cursor)
                    }
                    return .publish(Array(s.buffer.prefix(holdLimit - s.inFlight.count)))
                }
                // Nothing on a timer: every event, wake-up and stop bumps `ticks`.
                var until = Double.infinity
                if s.connected, !paused { until = min(until, max(s.statusDue, clock + 0.05)) }
                if paused, let end = s.health.notBefore { until = min(until, end) }
                return .wait(until: until, ticks: s.ticks)
            }
            switch step {
            case .stop:
                try? spool.ledger(MQTTSink.sinkName).recordAcknowledged(seqs: toRecord, now: Date())
                recordHealth()
                state.update {
                    $0.publisherRunning = false
                    $0.ticks += 1
                }
                return
            case .record(let seqs):
                do {
                    try spool.ledger(MQTTSink.sinkName).recordAcknowledged(seqs: seqs, now: now)
                    delivered()
                    if recordFailing {
                        recordFailing = false
                        logger.info("mqtt: acknowledged scans are recorded again")
                    }
                } catch {
                    // A full disk: keep them (libmosquitto no longer holds them, so nothing would send them
                    // again before a restart) and try again in a second; logged once per episode.
                    if !recordFailing {
                        recordFailing = true
                        logger.error(
                            "mqtt: cannot record acknowledged scans; retrying", [("error", error.description)])
                    }
                    toRecord = seqs + toRecord
                    state.wait(until: MonotonicClock.deadline(after: 1)) { $0.stopping }
                }
            case .status:
                let text = statusPayload(online: true)
                let changed = state.withLock { s in
                    defer { s.publishedStatus = text }
                    return s.publishedStatus != text
                }
                if changed { _ = client.publish(topic: settings.statusTopic, payload: Array(text.utf8), retain: true) }
                publishDiscovery(client)
            case .read(let after):
                do {
                    // Scans libmosquitto holds or the broker acknowledged (not yet recorded) are still pending in
                    // the spool: never read twice.
                    let owed = state.withLock { Set($0.inFlight.values) }.union(toRecord)
                    var start = after
                    var read = try spool.ledger(MQTTSink.sinkName).pending(afterSeq: start, limit: 500)
                    if read.allSatisfy({ owed.contains($0.seq) }), after > 0 {
                        // Caught up. A scan owed below the cursor that is neither (revived by `spool retry`, copied
                        // back by a salvage) is read from its place; one more small read, only when caught up.
                        let low = try spool.ledger(MQTTSink.sinkName).pending(afterSeq: 0, limit: owed.count + 1)
                        if let revived = low.first(where: { !owed.contains($0.seq) && $0.seq <= after }) {
                            start = revived.seq - 1
                            read = try spool.ledger(MQTTSink.sinkName).pending(afterSeq: start, limit: 500)
                        }
                    }
                    let page = read.filter { !owed.contains($0.seq) }
                    state.withLock { s in
                        guard s.cursor == after, s.buffer.isEmpty else { return }
                        s.buffer = page
                        // Past what it skipped, so the next read does not meet it again.
                        if page.isEmpty, let last = read.last?.seq, last > after { s.cursor = last }
                        if start < after, !page.isEmpty { s.cursor = start }
                        if read.count == 500 { s.wakeRequested = true }
                    }
                } catch {
                    // Disk trouble: try again in a second.
                    logger.error("mqtt: cannot read the spool", [("error", error.description)])
                    state.wait(until: MonotonicClock.deadline(after: 1)) { $0.stopping }
                    state.withLock { $0.wakeRequested = true }
                }
            case .publish(let batch):
                publish(batch, client: client, clock: clock, now: now)
            case .wait(let until, let ticks):
                // Other processes' commits (`scan`, `spool retry`) come as wake-ups too (`SpoolChangeWatch`).
                state.wait(until: until) { $0.stopping || $0.ticks != ticks }
            }
        }
    }

    /// Takes the PUBACKs that arrived: the scans acknowledged go to `toRecord`; a refusal pauses publishing.
    func takeAcks(_ s: inout State, into toRecord: inout [Int], now: Date) {
        var delivered: [Int] = []
        var refusal: Int32?
        for (mid, code) in s.acks {
            // Not ours: the status message.
            guard let seq = s.inFlight.removeValue(forKey: mid) else { continue }
            if code < 0x80 { delivered.append(seq) } else { refusal = code }
        }
        s.acks.removeAll()
        if s.inFlight.isEmpty { s.holding = false }
        s.stats.acknowledged += delivered.count
        toRecord += delivered
        if let refusal { pause(&s, "the broker refused a message: \(MQTTClient.reason(refusal))", now: now) }
    }

    /// Hands `batch` (the front of the buffer) to libmosquitto, in order, and registers what it now holds.
    func publish(_ batch: [SinkItem], client: MQTTClient, clock: Double, now: Date) {
        var held: [(Int32, Int)] = []
        var taken = 0
        var failure: Int32?
        for item in batch {
            // The read, not its delivery state: a resend after a reconnect carries the same bytes.
            let payload = Array(item.record.readJSON().encoded().utf8)
            let (rc, mid) = client.publish(topic: settings.topic(for: item.record), payload: payload)
            if MQTTClient.isSuccess(rc) || MQTTClient.isQueuedWithoutConnection(rc) {
                // Without a connection libmosquitto keeps the message and sends it after the next CONNACK.
                held.append((mid, item.seq))
            } else if MQTTClient.isOversize(rc) {
                let reason = "scan \(item.record.id) is larger than the broker accepts (\(payload.count) bytes)"
                logger.error("mqtt: scan not publishable; kept in the spool as refused", [("reason", reason)])
                try? spool.ledger(MQTTSink.sinkName).recordRefused(seq: item.seq, reason: reason, now: now)
            } else {
                failure = rc
                break
            }
            taken += 1
            if MQTTClient.isQueuedWithoutConnection(rc) { break }
        }
        state.withLock { s in
            s.buffer.removeFirst(min(taken, s.buffer.count))
            if taken > 0 { s.cursor = batch[taken - 1].seq }
            for (mid, seq) in held { s.inFlight[mid] = seq }
            s.stats.published += held.count
            // The next look at the status message comes within a second (its spool figures changed).
            s.statusDue = min(s.statusDue, clock + 1)
            if let failure {
                // Not taken by libmosquitto (e.g. the broker allows no QoS 1): retrying at once would spin.
                pause(&s, "libmosquitto did not take a message: \(MQTTClient.describe(failure))", now: now)
            }
        }
    }

    /// Home Assistant's discovery messages (`mqtt.homeAssistant`), for the sources `status` names: each one that
    /// changed since this connection began, and an empty retained message for one no longer wanted (a source gone).
    func publishDiscovery(_ client: MQTTClient) {
        guard let prefix = settings.homeAssistantPrefix else { return }
        var sources: [String] = []
        if case .object(let members)? = status()["sources"] { sources = members.map(\.0) }
        let discovery = HomeAssistantDiscovery(
            prefix: prefix, deviceID: settings.deviceID, topicBase: settings.topicBase, version: BridgeVersion.current)
        let wanted = Dictionary(
            discovery.messages(sources: sources).map { ($0.topic, $0.payload) }, uniquingKeysWith: { first, _ in first }
        )
        let previous = state.withLock { s in
            defer { s.publishedDiscovery = wanted }
            return s.publishedDiscovery
        }
        for (topic, payload) in wanted.sorted(by: { $0.key < $1.key }) where previous[topic] != payload {
            _ = client.publish(topic: topic, payload: Array(payload.utf8), retain: true)
        }
        for topic in previous.keys.sorted() where wanted[topic] == nil {
            _ = client.publish(topic: topic, payload: [], retain: true)
        }
    }
}
