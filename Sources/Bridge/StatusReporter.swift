import BridgeCore
import Forwarder
import Foundation
import Logging
import Spool

/// Keeps the running service's status snapshot (`plings-bridge status`) and Prometheus metrics up to date.
///
/// The snapshot goes to `status.json` in `$RUNTIME_DIRECTORY` (tmpfs under systemd) or beside the spool; it
/// is rewritten only when something in it changed, so an idle gate does not wear its flash. Metrics go to
/// `metrics.textfile` when configured. Both are written atomically (temporary file + rename).
public final class StatusReporter: Sendable {
    public struct Source: Sendable {
        public var kind: String
        public var state: @Sendable () -> String
        public var up: @Sendable () -> Bool
        public init(kind: String, state: @escaping @Sendable () -> String, up: @escaping @Sendable () -> Bool) {
            self.kind = kind
            self.state = state
            self.up = up
        }
    }

    let statusPath: String
    let metricsPath: String?
    let spool: Spool
    let pipeline: Pipeline
    let forwarder: Forwarder?
    let sources: [Source]
    let fixAge: @Sendable () -> Double?
    let started = Date()

    public init(
        statusPath: String, metricsPath: String?, spool: Spool, pipeline: Pipeline, forwarder: Forwarder?,
        sources: [Source], fixAge: @escaping @Sendable () -> Double?
    ) {
        self.statusPath = statusPath
        self.metricsPath = metricsPath
        self.spool = spool
        self.pipeline = pipeline
        self.forwarder = forwarder
        self.sources = sources
        self.fixAge = fixAge
    }

    /// Where `status.json` lives for a spool path (the `status` command uses the same rule).
    public static func statusPath(spoolPath: String, environment: [String: String]) -> String {
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first {
            return String(runtime) + "/status.json"
        }
        return (spoolPath as NSString).deletingLastPathComponent + "/status.json"
    }

    /// Refreshes the snapshot every `interval` seconds (metrics every `metricsInterval`) until cancelled.
    public func run(interval: Double, metricsInterval: Double) async {
        var last = ""
        var lastMetrics = 0.0
        while !Task.isCancelled {
            let snapshot = self.snapshot()
            var comparable = snapshot
            comparable.remove(key: "updatedAt")
            let text = comparable.encoded()
            if text != last {
                StatusReporter.writeAtomically(snapshot.encoded() + "\n", to: statusPath)
                last = text
            }
            if let metricsPath, MonotonicClock.now() - lastMetrics >= metricsInterval {
                StatusReporter.writeAtomically(metrics(), to: metricsPath)
                lastMetrics = MonotonicClock.now()
            }
            try? await Task.sleep(for: .seconds(interval))
        }
    }

    /// Removes the snapshot at shutdown: `status` then says the service is not running.
    public func clear() { try? FileManager.default.removeItem(atPath: statusPath) }

    func snapshot() -> JSONValue {
        let stats = try? spool.stats()
        let tally = pipeline.currentTally
        var delivery: JSONValue = .object([("state", .string("local spool only"))])
        if let forwarder {
            let health = forwarder.currentHealth
            let fstats = forwarder.currentStats
            let (state, reason): (String, String?) = {
                switch health {
                case .healthy: return ("delivering", nil)
                case .failing(let reason, _): return ("failing", reason)
                case .authPaused(let reason, _): return ("paused", reason)
                }
            }()
            delivery = .object([
                ("state", .string(state)), ("reason", reason.map(JSONValue.string) ?? .null),
                ("attempts", .integer(fstats.attempts)), ("delivered", .integer(fstats.delivered)),
                ("dead", .integer(fstats.dead)), ("failures", .integer(fstats.failures)),
            ])
        }
        let lastReads = tally.lastRead.sorted { $0.key < $1.key }.map { key, value in
            (
                key,
                JSONValue.object([("time", .string(Timestamp.format(value.time))), ("outcome", .string(value.outcome))])
            )
        }
        return .object([
            ("pid", .integer(Int(getpid()))),
            ("version", .string(BridgeVersion.current)),
            ("startedAt", .string(Timestamp.format(started))),
            ("updatedAt", .string(Timestamp.format(Date()))),
            (
                "spool",
                stats.map { s in
                    .object([
                        ("path", .string(spool.path)), ("counts", s.json()["counts"] ?? .null),
                        ("oldestPendingAge", s.oldestPendingAge.map { .number(($0).rounded()) } ?? .null),
                    ])
                } ?? .null
            ),
            ("delivery", delivery),
            (
                "sources",
                .array(
                    sources.map {
                        .object([
                            ("kind", .string($0.kind)), ("state", .string($0.state())),
                            ("up", .bool($0.up())),
                        ])
                    })
            ),
            ("reads", .object(tally.reads.sorted { $0.key < $1.key }.map { ($0.key, .integer($0.value)) })),
            ("lastReads", .object(lastReads)),
            ("lastError", (tally.lastError ?? stats?.lastError).map(JSONValue.string) ?? .null),
        ])
    }

    func metrics() -> String {
        var m = MetricsText()
        m.add("plings_bridge_up", 1, help: "1 while the service runs")
        for (key, value) in pipeline.currentTally.reads.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "/").map(String.init)
            guard parts.count == 2 else { continue }
            m.add(
                "plings_bridge_reads_total", Double(value), labels: [("source", parts[0]), ("outcome", parts[1])],
                help: "Reads by source and outcome", type: "counter")
        }
        if let stats = try? spool.stats() {
            for state in ScanState.allCases {
                m.add(
                    "plings_bridge_spool_scans", Double(stats.counts[state] ?? 0), labels: [("state", state.rawValue)],
                    help: "Scans in the spool by state")
            }
            m.add(
                "plings_bridge_oldest_pending_age_seconds", stats.oldestPendingAge ?? 0,
                help: "Age of the oldest pending scan (0 when none)")
        }
        if let forwarder {
            let s = forwarder.currentStats
            m.add(
                "plings_bridge_delivery_attempts_total", Double(s.attempts), help: "Delivery attempts", type: "counter")
            m.add(
                "plings_bridge_delivery_failures_total", Double(s.failures), help: "Failed delivery attempts",
                type: "counter")
            let healthy: Double = { if case .healthy = forwarder.currentHealth { return 1 } else { return 0 } }()
            m.add("plings_bridge_delivery_healthy", healthy, help: "1 while the API accepts scans")
        }
        if let age = fixAge() { m.add("plings_bridge_gps_fix_age_seconds", age, help: "Age of the latest GPS fix") }
        for source in sources {
            m.add(
                "plings_bridge_source_up", source.up() ? 1 : 0, labels: [("source", source.kind)],
                help: "1 when the source has a working device")
        }
        return m.text
    }

    static func writeAtomically(_ text: String, to path: String) {
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)) else { return }
        if rename(temporary, path) != 0 { try? FileManager.default.removeItem(atPath: temporary) }
    }
}

extension JSONValue {
    mutating func remove(key: String) {
        if case .object(let members) = self { self = .object(members.filter { $0.0 != key }) }
    }
}
