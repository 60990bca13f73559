import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What a queue sink module gives the runner: how its settings come from the configuration, what they show, how
/// many workers they ask for, and the transport that sends under them. Everything else (threads, claims,
/// outcomes, backoff, pause, reload, status, metrics, `scan`'s one attempt) is `QueuedSink`'s and the runner's.
/// The API, the webhook and MQTT are such kinds.
public struct QueuedSinkKind<Settings: Sendable & Equatable>: Sendable {
    /// The spool queue, log prefix, thread and metric name ("api", "webhook").
    public let name: String
    /// The settings for a configuration; nil when the sink is not configured. A thrown error is a setting the
    /// sink cannot use (a secret file it cannot read): it is logged and the sink keeps what it runs.
    public let settings: @Sendable (SinkConfiguration) throws -> Settings?
    /// A few fields for `status` and the start line (the URL...), never a secret.
    public let describe: @Sendable (Settings) -> [(String, String)]
    /// Worker threads, each with its own connection (the API's `concurrency`). Fixed for a runner: new settings
    /// that ask for another count make a new runner; every other change is taken in place.
    public let workers: @Sendable (Settings) -> Int
    /// Strings that must never reach a log line (tokens, secrets), added to the logger for every settings.
    public let secrets: @Sendable (Settings) -> [String]
    /// A transport that sends under the settings of the moment (`current()` is read before each request, so a
    /// reload reaches the next one); nil when it cannot be made (the reason is logged by the maker).
    public let transport:
        @Sendable (_ current: @escaping @Sendable () -> Settings, Logger) -> (any QueuedSinkTransport)?
    /// The lines its runner logs (`QueuedSinkVoice.named(name)` unless the sink has its own words).
    public let voice: @Sendable (_ current: @escaping @Sendable () -> Settings) -> QueuedSinkVoice
    /// The backoff after failures (the runner's 1 s to 5 min unless the kind has its own: a broker reconnects
    /// within 30 s).
    public let backoff: Backoff
    /// The health before the first answer: healthy, or `starting` for a sink that must connect first.
    public let initialHealth: SinkHealth.State
    /// Whether new settings reach the running sink in place (else a new sink replaces it). By default, unless they
    /// ask for another worker count; a broker session takes no new settings in place.
    public let inPlace: @Sendable (_ old: Settings, _ new: Settings) -> Bool

    public init(
        name: String, settings: @escaping @Sendable (SinkConfiguration) throws -> Settings?,
        describe: @escaping @Sendable (Settings) -> [(String, String)],
        workers: @escaping @Sendable (Settings) -> Int = { _ in 1 },
        secrets: @escaping @Sendable (Settings) -> [String] = { _ in [] },
        backoff: Backoff = QueuedSinkRunner.backoff, initialHealth: SinkHealth.State = .healthy,
        inPlace: (@Sendable (Settings, Settings) -> Bool)? = nil,
        voice: (@Sendable (@escaping @Sendable () -> Settings) -> QueuedSinkVoice)? = nil,
        transport: @escaping @Sendable (@escaping @Sendable () -> Settings, Logger) -> (any QueuedSinkTransport)?
    ) {
        self.name = name
        self.settings = settings
        self.describe = describe
        self.workers = workers
        self.secrets = secrets
        self.backoff = backoff
        self.initialHealth = initialHealth
        self.inPlace = inPlace ?? { old, new in workers(old) == workers(new) }
        self.voice = voice ?? { _ in .named(name) }
        self.transport = transport
    }
}

/// A queue sink at work: its kind's runner and the settings it sends under now. A reload that keeps the worker
/// count reaches the next request through `update` (a new token or URL needs no restart).
public final class QueuedSink<Settings: Sendable & Equatable>: Service, SlotSink {
    public let kind: QueuedSinkKind<Settings>
    public var name: String { kind.name }
    private let current: Mutex<Settings>
    private let runner: QueuedSinkRunner
    private let logger: Logger
    /// What sends for it (the broker session of MQTT, whose connection count the metrics show).
    public let transport: any QueuedSinkTransport

    /// A sink for `settings`, not yet started; nil when its transport cannot be made (the maker logged why).
    public init?(
        _ kind: QueuedSinkKind<Settings>, settings: Settings, spool: Spool, logger: Logger,
        healthChanged: @escaping @Sendable () -> Void = {}, delivered: @escaping @Sendable () -> Void = {}
    ) {
        let current = Mutex(settings)
        let read: @Sendable () -> Settings = { current.withLock { $0 } }
        kind.secrets(settings).forEach(logger.addSecret)
        guard let transport = kind.transport(read, logger) else { return nil }
        self.kind = kind
        self.current = current
        self.logger = logger
        self.transport = transport
        runner = QueuedSinkRunner(
            name: kind.name, sink: kind.name, spool: spool, transport: transport,
            workers: max(1, kind.workers(settings)),
            voice: kind.voice(read), logger: logger, healthChanged: healthChanged, delivered: delivered,
            backoff: kind.backoff, initialHealth: kind.initialHealth)
    }

    /// The settings the next request goes under.
    public var settings: Settings { current.withLock { $0 } }
    /// Delivery health, for `status` and the metrics.
    public var currentHealth: SinkHealth.State { runner.currentHealth }
    /// Counters in scans, since start.
    public var currentStats: DeliveryStats { runner.currentStats }

    /// Starts the workers and the thread that claims for them.
    public func start() { runner.start() }

    /// A scan was committed (or the device's state changed): look for work now.
    public func wake() {
        runner.wake()
        transport.wake()
    }

    /// A reload: `new` reaches the next request (false when it asks for another worker count: then a new sink
    /// must replace this one), and a pause or a backoff ends at once, for the operator fixed something.
    public func update(_ new: Settings) -> Bool {
        guard kind.inPlace(settings, new) else { return false }
        kind.secrets(new).forEach(logger.addSecret)
        current.withLock { $0 = new }
        runner.resume()
        return true
    }

    /// Stops taking work (`QueuedSinkRunner.stop`): requests in flight are told to finish and get until one second
    /// before the monotonic `deadline`, then are cancelled (their scans stay queued).
    public func stop(deadline: Double) { runner.stop(deadline: deadline) }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 4.5) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    /// What `deliverOnce` did.
    public enum OneAttempt: Sendable {
        /// An earlier scan of the identifier is queued for the sink: the scan is left to the service so capture
        /// order holds.
        case notHead
        /// No connection could be made (logged by the transport); the scan was released untouched.
        case noConnection
        /// The attempt's outcome, recorded in the spool (nil: cancelled, the scan was released).
        case sent(DeliveryOutcome?)
    }

    /// `scan`'s single attempt (docs/contracts.md, "Delivery order"): only when no earlier scan of the identifier
    /// is queued for the sink; sent through the kind's transport, recorded and told exactly as a worker does, a
    /// retry due after the first backoff.
    public static func deliverOnce(
        _ kind: QueuedSinkKind<Settings>, scanID: String, settings: Settings, spool: Spool, logger: Logger
    ) -> OneAttempt {
        let read: @Sendable () -> Settings = { settings }
        kind.secrets(settings).forEach(logger.addSecret)
        guard let transport = kind.transport(read, logger) else { return .noConnection }
        let ledger = spool.ledger(kind.name)
        guard let record = try? ledger.claimIfHead(id: scanID, now: Date(), lease: transport.lease) else {
            return .notHead
        }
        guard let connection = transport.connect() else {
            try? ledger.release(id: scanID)
            return .noConnection
        }
        let outcome: DeliveryOutcome?
        switch connection.deliver(DeliveryBatch(key: record.id, records: [record])) {
        case .whole(let one)?: outcome = one
        case .each(let all)?: outcome = all.first ?? nil
        case .refused(let reason)?: outcome = .retry(reason: reason, retryAfter: nil)
        case nil: outcome = nil
        }
        let now = Date()
        var retryAt: Date?
        if case .retry(_, let retryAfter)? = outcome {
            retryAt = now.addingTimeInterval(
                QueuedSinkRunner.backoff.delay(attempt: 0, retryAfter: retryAfter, random: Double.random(in: 0...1)))
        }
        let voice = kind.voice(read)
        do {
            try ledger.recordAttempts(
                batch: record.id, [(record.id, QueuedSinkRunner.attemptRecord(outcome, retryAt: retryAt, now: now))],
                keepBatch: !QueuedSinkRunner.isFinal(outcome), now: now)
        } catch {
            // No retry here, unlike a worker's: the scan stays leased and the service sends it after the lease.
            logger.error(
                "\(voice.prefix): cannot record the outcome", [("id", record.id), ("error", error.description)])
        }
        voice.tell(outcome, id: record.id, logger: logger)
        return .sent(outcome)
    }
}

/// The words a queue sink's slot logs when it starts, is replaced and is removed (the default names the sink).
public struct QueuedSinkLines<Settings: Sendable & Equatable>: Sendable {
    public var started: @Sendable (Settings) -> (String, [(String, String)])
    public var replaced: (@Sendable (Settings) -> (String, [(String, String)]))?
    public var removed: String

    public init(
        started: @escaping @Sendable (Settings) -> (String, [(String, String)]),
        replaced: (@Sendable (Settings) -> (String, [(String, String)]))? = nil, removed: String
    ) {
        self.started = started
        self.replaced = replaced
        self.removed = removed
    }
}

extension SinkSlotKind where Running == QueuedSink<Settings> {
    /// The slot's kind for a queue sink: a runner with the kind's transport and workers; a reload that keeps the
    /// worker count reaches the running sink in place (and ends a pause or a backoff), one that changes it makes a
    /// new sink; `status` and the metrics show its health, queue and counters, the same for every queue sink.
    /// `metrics` adds a sink's own families after the shared ones.
    public static func queued(
        _ kind: QueuedSinkKind<Settings>, lines: QueuedSinkLines<Settings>? = nil,
        metrics more: @escaping @Sendable (QueuedSink<Settings>, inout MetricsText) -> Void = { _, _ in }
    ) -> Self {
        let lines =
            lines
            ?? QueuedSinkLines(
                started: { ("scans also go to the \(kind.name)", kind.describe($0)) },
                removed: "\(kind.name): not configured; scans are no longer queued for it")
        return SinkSlotKind(
            name: kind.name, queue: kind.name, settings: kind.settings,
            make: { settings, context in
                do {
                    try context.spool.registerSink(kind.name)
                } catch {
                    // A full disk at start: the queue registered by an earlier start (if any) is still there, and
                    // what it holds still goes; a commit cannot succeed on that disk either.
                    context.logger.error(
                        "\(kind.name): cannot register its queue; delivering what it holds",
                        [("error", "\(error)")])
                }
                guard
                    let sink = QueuedSink(
                        kind, settings: settings, spool: context.spool, logger: context.logger,
                        healthChanged: context.stateChanged, delivered: context.delivered)
                else { return nil }
                sink.start()
                return sink
            },
            reload: { sink, _, new in sink.update(new) },
            started: lines.started, replaced: lines.replaced, removed: lines.removed,
            status: { running, context in
                guard let (sink, settings) = running else { return .null }
                let (state, reason) = sink.currentHealth.described
                let stats = sink.currentStats
                return .object(
                    [("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null)]
                        + kind.describe(settings).map { ($0.0, JSONValue.string($0.1)) }
                        + [
                            ("pending", .integer((try? context.spool.sinkStats(named: kind.name))?.pending ?? 0)),
                            ("delivered", .integer(stats.delivered)), ("dead", .integer(stats.dead)),
                            ("attempts", .integer(stats.attempts)), ("failures", .integer(stats.failures)),
                        ])
            },
            metrics: { sink, _, context, m in
                // `plings_bridge_<name>_state{state}`, `_pending`, and the counters.
                let (prefix, stats) = ("plings_bridge_\(kind.name)", sink.currentStats)
                m.addState(
                    "\(prefix)_state", states: ["delivering", "failing", "paused"],
                    current: sink.currentHealth.described.state,
                    help: "1 for the \(kind.name) sink's current state (as `status` shows it)")
                m.add(
                    "\(prefix)_pending", Double((try? context.spool.sinkStats(named: kind.name))?.pending ?? 0),
                    help: "Scans queued for the \(kind.name) sink")
                m.addCounter(
                    "\(prefix)_delivered_total", stats.delivered, help: "Scans the \(kind.name) sink delivered")
                m.addCounter("\(prefix)_dead_total", stats.dead, help: "Scans the \(kind.name) sink refused for good")
                m.addCounter(
                    "\(prefix)_failures_total", stats.failures,
                    help: "Scans in attempts to the \(kind.name) sink that failed and will be retried")
                more(sink, &m)
            })
    }
}
