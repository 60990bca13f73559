import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What a queue sink module gives the slot: how its settings come from the configuration, what they show, and
/// the transport they make. Everything else (thread, claims, outcomes, backoff, pause, reload, status, metrics)
/// is the slot's and the runner's.
public struct QueuedSinkKind<Settings: Sendable & Equatable>: Sendable {
    /// The spool queue, log prefix, thread and metric name ("webhook").
    public let name: String
    /// The settings for a configuration; nil when the sink is not configured. A thrown error is a setting the
    /// sink cannot use (a secret file it cannot read): it is logged and the sink keeps what it runs.
    public let settings: @Sendable (SinkConfiguration) throws -> Settings?
    /// Batch size and lease for these settings.
    public let options: @Sendable (Settings) -> QueuedSinkRunner.Options
    /// A few fields for `status` and the start line (the URL...), never a secret.
    public let describe: @Sendable (Settings) -> [(String, String)]
    /// A transport for these settings; nil when it cannot be made (the reason is logged by the maker).
    public let transport: @Sendable (Settings, Logger) -> (any QueuedSinkTransport)?

    public init(
        name: String, settings: @escaping @Sendable (SinkConfiguration) throws -> Settings?,
        options: @escaping @Sendable (Settings) -> QueuedSinkRunner.Options,
        describe: @escaping @Sendable (Settings) -> [(String, String)],
        transport: @escaping @Sendable (Settings, Logger) -> (any QueuedSinkTransport)?
    ) {
        self.name = name
        self.settings = settings
        self.options = options
        self.describe = describe
        self.transport = transport
    }
}

/// The running queue sink, if configured, replaceable on SIGHUP: changed settings make a new runner (the old one's
/// claims are released at its stop, so the new one takes them at once); the same settings end a pause. Removing
/// the section stops it and stops queueing scans for it (what is queued stays for when it returns).
public final class QueuedSinkSlot<Settings: Sendable & Equatable>: ScanSink {
    public var name: String { kind.name }
    private let kind: QueuedSinkKind<Settings>
    private let context: SinkContext
    private struct Running {
        var runner: QueuedSinkRunner
        var settings: Settings
    }
    private let current = Mutex<Running?>(nil)
    private let started = Mutex(false)

    public init(_ kind: QueuedSinkKind<Settings>, context: SinkContext) {
        self.kind = kind
        self.context = context
    }

    public func start() {
        started.withLock { $0 = true }
        apply(context.configuration)
    }

    public func stop(deadline: Double) {
        started.withLock { $0 = false }
        current.withLock { slot -> Running? in
            defer { slot = nil }
            return slot
        }?.runner.stop(deadline: deadline)
    }

    public func wake() { current.withLock { $0 }?.runner.wake() }

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
        let running = current.withLock { $0 }
        if let running, let settings, running.settings == settings {
            running.runner.resume()
            return
        }
        running?.runner.stop(deadline: MonotonicClock.deadline(after: 3))
        current.withLock { $0 = nil }
        guard let settings else {
            if (try? context.spool.sinkNames())?.contains(kind.name) == true {
                try? context.spool.disableSink(kind.name)
                logger.info("\(kind.name): not configured; scans are no longer queued for it")
            }
            return
        }
        guard let transport = kind.transport(settings, logger) else { return }
        do {
            try context.spool.registerSink(kind.name)
        } catch {
            // A full disk at start: the queue registered by an earlier start (if any) is still there, and what
            // it holds still goes; a commit cannot succeed on that disk either.
            logger.error(
                "\(kind.name): cannot register its queue; delivering what it holds", [("error", error.description)])
        }
        let runner = QueuedSinkRunner(
            name: kind.name, spool: context.spool, transport: transport, options: kind.options(settings),
            logger: logger, healthChanged: context.stateChanged, delivered: context.delivered)
        current.withLock { $0 = Running(runner: runner, settings: settings) }
        runner.start()
        logger.info("scans also go to the \(kind.name)", kind.describe(settings))
    }

    /// Its `status` member: health, queue and counters; null when not configured.
    public var statusEntry: JSONValue {
        guard let running = current.withLock({ $0 }) else { return .null }
        let (state, reason) = Self.describe(running.runner.currentHealth)
        let stats = running.runner.currentStats
        let queue = queueStats
        return .object(
            [("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null)]
                + kind.describe(running.settings).map { ($0.0, JSONValue.string($0.1)) }
                + [
                    ("pending", .integer(queue?.pending ?? 0)), ("delivered", .integer(stats.delivered)),
                    ("dead", .integer(stats.dead)), ("attempts", .integer(stats.attempts)),
                    ("failures", .integer(stats.failures)),
                ])
    }

    /// `plings_bridge_<name>_state{state}`, `_pending`, and the counters.
    public func addMetrics(to m: inout MetricsText) {
        guard let running = current.withLock({ $0 }) else { return }
        let prefix = "plings_bridge_\(kind.name)"
        let (currentState, _) = Self.describe(running.runner.currentHealth)
        for state in ["delivering", "failing", "paused"] {
            m.add(
                "\(prefix)_state", state == currentState ? 1 : 0, labels: [("state", state)],
                help: "1 for the \(kind.name) sink's current state (as `status` shows it)")
        }
        m.add("\(prefix)_pending", Double(queueStats?.pending ?? 0), help: "Scans queued for the \(kind.name) sink")
        let stats = running.runner.currentStats
        m.add(
            "\(prefix)_delivered_total", Double(stats.delivered), help: "Scans the \(kind.name) sink delivered",
            type: "counter")
        m.add(
            "\(prefix)_dead_total", Double(stats.dead), help: "Scans the \(kind.name) sink refused for good",
            type: "counter")
        m.add(
            "\(prefix)_failures_total", Double(stats.failures),
            help: "Scans in attempts to the \(kind.name) sink that failed and will be retried", type: "counter")
    }

    private var queueStats: SinkStats? { (try? context.spool.sinkStats())?.first { $0.name == kind.name } }

    /// The state `status` shows for `health`, and its reason.
    static func describe(_ health: SinkHealth.State) -> (state: String, reason: String?) {
        switch health {
        case .starting, .healthy: return ("delivering", nil)
        case .failing(let reason, _): return ("failing", reason)
        case .paused(let reason, _): return ("paused", reason)
        }
    }
}
