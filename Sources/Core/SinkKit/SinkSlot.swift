import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What a slot runs: a sink made for one set of settings, already started, woken after commits, stopped by a
/// deadline. `QueuedSink` (the API, MQTT, the webhook) is such a sink.
public protocol SlotSink: AnyObject, Sendable {
    /// Scans were committed: look at the spool again. Never blocks.
    func wake()
    /// Stops by `deadline` (monotonic seconds); what it had claimed stays queued.
    func stop(deadline: Double)
}

/// One kind of sink as its slot makes, reloads, shows and removes it. Only what differs between sinks is here;
/// the slot holds the rest (start, the reload decision, replacement, removal, the guarded current sink).
public struct SinkSlotKind<Running: SlotSink, Settings: Sendable & Equatable>: Sendable {
    /// The name the service group and the logs know it by ("api", "mqtt", "webhook").
    public var name: String
    /// The spool queue no longer fed when the sink's section goes (nil: scans stay queued for it regardless).
    public var queue: String?
    /// The settings for a configuration; nil when the sink is not configured. A thrown error is a setting the sink
    /// cannot use (a secret file it cannot read): it is logged and the sink keeps what it runs.
    public var settings: @Sendable (SinkConfiguration) throws -> Settings?
    /// A started sink for these settings; nil when it cannot run (the reason is logged by the maker).
    public var make: @Sendable (Settings, SinkContext) -> Running?
    /// A reload while `running` runs with `current`: true when it took `new` in place (it ends its pause or
    /// backoff then), false when a new sink must replace it.
    public var reload: @Sendable (_ running: Running, _ current: Settings, _ new: Settings) -> Bool
    /// The line (and fields) logged when a sink starts for these settings, and the one when a changed setting
    /// made a new one (nil: the same line).
    public var started: @Sendable (Settings) -> (String, [(String, String)])
    public var replaced: (@Sendable (Settings) -> (String, [(String, String)]))?
    /// Logged when the section goes and a sink was running or its queue was still fed.
    public var removed: String
    /// A limit on the sink's share of the service's stop deadline (seconds), so a silent peer never takes the
    /// time the other sinks' last deliveries need.
    public var stopWithin: Double?
    /// Its `status` member, given the running sink and its settings (nil when not configured).
    public var status: @Sendable (_ running: (sink: Running, settings: Settings)?, SinkContext) -> JSONValue
    /// Its metric families while it runs.
    public var metrics: @Sendable (_ sink: Running, _ settings: Settings, SinkContext, inout MetricsText) -> Void

    public init(
        name: String, queue: String?, settings: @escaping @Sendable (SinkConfiguration) throws -> Settings?,
        make: @escaping @Sendable (Settings, SinkContext) -> Running?,
        reload: @escaping @Sendable (Running, Settings, Settings) -> Bool,
        started: @escaping @Sendable (Settings) -> (String, [(String, String)]),
        replaced: (@Sendable (Settings) -> (String, [(String, String)]))? = nil, removed: String,
        stopWithin: Double? = nil,
        status: @escaping @Sendable ((sink: Running, settings: Settings)?, SinkContext) -> JSONValue,
        metrics: @escaping @Sendable (Running, Settings, SinkContext, inout MetricsText) -> Void
    ) {
        self.name = name
        self.queue = queue
        self.settings = settings
        self.make = make
        self.reload = reload
        self.started = started
        self.replaced = replaced
        self.removed = removed
        self.stopWithin = stopWithin
        self.status = status
        self.metrics = metrics
    }
}

/// The running sink of one kind, if configured, replaceable on SIGHUP: the reload slot every sink shares. Same
/// settings (or a change the running sink takes in place) reach the running one; changed ones make a new sink
/// (the old one's claims are released at its stop, so the new one takes them at once); removing the section stops
/// it and stops queueing scans for it (what is queued stays for when it returns).
public final class SinkSlot<Running: SlotSink, Settings: Sendable & Equatable>: ScanSink {
    public var name: String { kind.name }
    private let kind: SinkSlotKind<Running, Settings>
    private let context: SinkContext
    private struct Current {
        var sink: Running
        var settings: Settings
    }
    private let current = Mutex<Current?>(nil)
    private let started = Mutex(false)
    /// How long a replaced sink gets to stop.
    static var replaceWithin: Double { 3 }

    public init(_ kind: SinkSlotKind<Running, Settings>, context: SinkContext) {
        self.kind = kind
        self.context = context
    }

    /// The sink running now and its settings, if any.
    public var running: (sink: Running, settings: Settings)? { current.withLock { $0 }.map { ($0.sink, $0.settings) } }

    public func start() {
        started.withLock { $0 = true }
        apply(context.configuration)
    }

    public func stop(deadline: Double) {
        started.withLock { $0 = false }
        let stopping = current.withLock { slot -> Current? in
            defer { slot = nil }
            return slot
        }
        let limit = kind.stopWithin.map { min(deadline, MonotonicClock.deadline(after: $0)) } ?? deadline
        stopping?.sink.stop(deadline: limit)
    }

    public func wake() { current.withLock { $0 }?.sink.wake() }

    public func apply(_ configuration: SinkConfiguration) {
        guard started.withLock({ $0 }) else { return }
        let logger = context.logger
        let settings: Settings?
        do {
            settings = try kind.settings(configuration)
        } catch {
            logger.error("\(kind.name): not delivering (scans stay queued): \(error)")
            return
        }
        let previous = current.withLock { $0 }
        if let previous, let settings, kind.reload(previous.sink, previous.settings, settings) {
            current.withLock { $0?.settings = settings }
            return
        }
        previous?.sink.stop(deadline: MonotonicClock.deadline(after: Self.replaceWithin))
        current.withLock { $0 = nil }
        guard let settings else {
            var stopped = previous != nil
            if let queue = kind.queue, (try? context.spool.sinkStats(named: queue))?.enabled == true {
                try? context.spool.disableSink(queue)
                stopped = true
            }
            if stopped { logger.info(kind.removed) }
            return
        }
        guard let sink = kind.make(settings, context) else { return }
        current.withLock { $0 = Current(sink: sink, settings: settings) }
        let (line, fields) = (previous == nil ? kind.started : kind.replaced ?? kind.started)(settings)
        logger.info(line, fields)
    }

    public var statusEntry: JSONValue { kind.status(running, context) }

    public func addMetrics(to metrics: inout MetricsText) {
        guard let running else { return }
        kind.metrics(running.sink, running.settings, context, &metrics)
    }
}

extension SinkHealth.State {
    /// The state `status` shows for a delivering sink ("delivering", "failing", "paused"), and its reason.
    public var described: (state: String, reason: String?) {
        switch self {
        case .starting, .healthy: return ("delivering", nil)
        case .failing(let reason, _): return ("failing", reason)
        case .paused(let reason, _): return ("paused", reason)
        }
    }
}
