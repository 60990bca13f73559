import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What a queue sink module gives the slot: how its settings come from the configuration, what they show, and
/// the transport they make. Everything else (threads, claims, outcomes, backoff, pause, reload, status, metrics)
/// is the slot's and the runner's. One worker: requests go one at a time.
public struct QueuedSinkKind<Settings: Sendable & Equatable>: Sendable {
    /// The spool queue, log prefix, thread and metric name ("webhook").
    public let name: String
    /// The settings for a configuration; nil when the sink is not configured. A thrown error is a setting the
    /// sink cannot use (a secret file it cannot read): it is logged and the sink keeps what it runs.
    public let settings: @Sendable (SinkConfiguration) throws -> Settings?
    /// A few fields for `status` and the start line (the URL...), never a secret.
    public let describe: @Sendable (Settings) -> [(String, String)]
    /// A transport for these settings; nil when it cannot be made (the reason is logged by the maker).
    public let transport: @Sendable (Settings, Logger) -> (any QueuedSinkTransport)?

    public init(
        name: String, settings: @escaping @Sendable (SinkConfiguration) throws -> Settings?,
        describe: @escaping @Sendable (Settings) -> [(String, String)],
        transport: @escaping @Sendable (Settings, Logger) -> (any QueuedSinkTransport)?
    ) {
        self.name = name
        self.settings = settings
        self.describe = describe
        self.transport = transport
    }
}

extension QueuedSinkRunner: SlotSink {}

extension SinkSlotKind where Running == QueuedSinkRunner {
    /// The slot's kind for a queue sink: a runner with the kind's transport; the same settings end a pause or a
    /// backoff, changed ones make a new runner; `status` and the metrics show its health, queue and counters.
    public static func queued(_ kind: QueuedSinkKind<Settings>) -> Self {
        SinkSlotKind(
            name: kind.name, queue: kind.name, settings: kind.settings,
            make: { settings, context in
                guard let transport = kind.transport(settings, context.logger) else { return nil }
                do {
                    try context.spool.registerSink(kind.name)
                } catch {
                    // A full disk at start: the queue registered by an earlier start (if any) is still there, and
                    // what it holds still goes; a commit cannot succeed on that disk either.
                    context.logger.error(
                        "\(kind.name): cannot register its queue; delivering what it holds",
                        [("error", "\(error)")])
                }
                let runner = QueuedSinkRunner(
                    name: kind.name, sink: kind.name, spool: context.spool, transport: transport, workers: 1,
                    voice: .named(kind.name), logger: context.logger, healthChanged: context.stateChanged,
                    delivered: context.delivered)
                runner.start()
                return runner
            },
            reload: { runner, current, new in
                guard current == new else { return false }
                runner.resume()
                return true
            },
            started: { ("scans also go to the \(kind.name)", kind.describe($0)) },
            removed: "\(kind.name): not configured; scans are no longer queued for it",
            status: { running, context in
                guard let (runner, settings) = running else { return .null }
                let (state, reason) = runner.currentHealth.described
                let stats = runner.currentStats
                return .object(
                    [("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null)]
                        + kind.describe(settings).map { ($0.0, JSONValue.string($0.1)) }
                        + [
                            ("pending", .integer((try? context.spool.sinkStats(named: kind.name))?.pending ?? 0)),
                            ("delivered", .integer(stats.delivered)), ("dead", .integer(stats.dead)),
                            ("attempts", .integer(stats.attempts)), ("failures", .integer(stats.failures)),
                        ])
            },
            metrics: { runner, _, context, m in
                // `plings_bridge_<name>_state{state}`, `_pending`, and the counters.
                let (prefix, stats) = ("plings_bridge_\(kind.name)", runner.currentStats)
                m.addState(
                    "\(prefix)_state", states: ["delivering", "failing", "paused"],
                    current: runner.currentHealth.described.state,
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
            })
    }
}
