import BridgeCore
import Foundation
import Logging
import Platform
import SinkKit
import SourceKit
import ReadPipeline
import Spool

/// Keeps the running service's status snapshot (`plings-bridge status`) and Prometheus metrics up to date.
///
/// The snapshot goes to `status.json` in `$RUNTIME_DIRECTORY` (tmpfs under systemd) or beside the spool; it
/// is rewritten only when something in it changed, so an idle gate does not wear its flash. Metrics go to
/// `metrics.textfile` when configured. Both are replaced atomically (temporary file, fsync, rename, directory
/// fsync); status.json is 0640 (the service's group reads it), the metrics file 0644 (node_exporter runs as
/// another user). A failed write is logged once (and again once it works), and shows in the snapshot's
/// `metrics` entry, which `doctor` reads. The work runs on its own thread, never on the cooperative pool: it reads
/// the spool and writes files. Each build is published on the `StatusBoard`, where the sinks that show the status
/// read it, and where every part asks for the next build (`changed`); the sinks are woken when it changed.
public final class StatusReporter: Service {
    public struct Source: Sendable {
        public var kind: String
        public var state: @Sendable () -> String
        public var up: @Sendable () -> Bool
        /// More members for the source's status entry (the NFC feedback counters).
        public var details: @Sendable () -> [(String, JSONValue)]
        public init(
            kind: String, state: @escaping @Sendable () -> String, up: @escaping @Sendable () -> Bool,
            details: @escaping @Sendable () -> [(String, JSONValue)] = { [] }
        ) {
            self.kind = kind
            self.state = state
            self.up = up
            self.details = details
        }
    }

    /// What the last writes did, for one log line per change and for the snapshot.
    private struct Progress {
        var lastSnapshot = ""
        var lastMetrics = -Double.infinity
        var statusError: String?
        var metricsError: String?
    }

    public let name = "status"
    let statusPath: String
    let metricsPath: String?
    let metricsInterval: Double
    let spool: Spool
    let pipeline: Pipeline
    /// The running sinks with their `status` members, in the registry's order.
    let sinks: [(key: String, sink: any ScanSink)]
    let sources: [Source]
    let fixAge: @Sendable () -> Double?
    let location: @Sendable () -> JSONValue
    let configuration: @Sendable () -> JSONValue
    /// The device's health for MQTT's status message (`StatusBoard.device`).
    let device: @Sendable () -> JSONValue
    let board: StatusBoard
    let logger: Logger
    let started = Date()
    private let progress = Mutex(Progress())
    private let thread: Mutex<WorkerThread?> = Mutex(nil)
    /// One refresh at a time: the thread's and a reload's (`refresh()` from the signal loop) never interleave. It
    /// counts the refreshes: a `Mutex<Void>` keeps its empty value at the address of its pthread pointer, and
    /// ThreadSanitizer takes the unlocked read of that pointer for a race with the value's access.
    private let writing = Mutex(0)

    public init(
        statusPath: String, metricsPath: String?, metricsInterval: Double = 15, spool: Spool, pipeline: Pipeline,
        sinks: [(key: String, sink: any ScanSink)] = [], sources: [Source],
        fixAge: @escaping @Sendable () -> Double?, location: @escaping @Sendable () -> JSONValue = { .null },
        configuration: @escaping @Sendable () -> JSONValue = { .null },
        device: @escaping @Sendable () -> JSONValue = { .null }, board: StatusBoard = StatusBoard(), logger: Logger
    ) {
        self.device = device
        self.board = board
        self.location = location
        self.configuration = configuration
        self.statusPath = statusPath
        self.metricsPath = metricsPath
        self.metricsInterval = metricsInterval
        self.spool = spool
        self.pipeline = pipeline
        self.sinks = sinks
        self.sources = sources
        self.fixAge = fixAge
        self.logger = logger
    }

    /// How often the snapshot is looked at when nothing wakes the reporter: only its ages (the oldest pending
    /// scan's, the fix's) change with time alone. Everything else wakes it when it changes: a commit, a reload, a
    /// source's device coming or going, a sink's health (`StatusBoard.changed`), so an idle box is not woken every few seconds.
    public static let idleRefreshInterval: Double = 30

    /// Refreshes the snapshot at once, then whenever a part asks (`StatusBoard.changed`) and every
    /// `idleRefreshInterval` otherwise (metrics every `metricsInterval`), on its own thread.
    public func start() {
        let interval = metricsPath == nil ? Self.idleRefreshInterval : min(Self.idleRefreshInterval, metricsInterval)
        let worker = WorkerThread(name: "status", watched: true) { [self] in
            repeat { refresh() } while board.waitForNextBuild(period: interval)
        }
        thread.withLock { $0 = worker }
    }

    /// Stops refreshing, removes the snapshot (`status` then says the service is not running) and writes the
    /// metrics once more with `plings_bridge_up 0`.
    public func stop(deadline: Double) {
        thread.withLock { $0 }?.expectEnd()
        board.close()
        thread.withLock { $0 }?.join(until: deadline)
        try? FileManager.default.removeItem(atPath: statusPath)
        if let metricsPath { write(metrics(up: false), to: metricsPath, mode: 0o644, isMetrics: true) }
    }

    /// Publishes a first build on the board before any part starts, writing nothing: a sink that starts before
    /// the reporter (MQTT's first status message and its discovery) then shows the device from the first.
    public func prime() {
        _ = board.beginBuild()
        board.publish(status: snapshot(), metrics: nil, device: device())
    }

    /// One round: the snapshot when it changed, the metrics when they are due. Synchronous: when it returns, the
    /// status file says what the service is now (a reload waits for that).
    public func refresh() {
        writing.withLock { refreshes in
            refreshes += 1
            refreshUnderLock()
        }
    }

    private func refreshUnderLock() {
        let metricsWanted = board.beginBuild()
        let snapshot = self.snapshot()
        let text = snapshot.removing(key: "updatedAt").encoded()
        if progress.withLock({ $0.lastSnapshot != text }) {
            if write(snapshot.encoded() + "\n", to: statusPath, mode: 0o640, isMetrics: false) {
                progress.withLock { $0.lastSnapshot = text }
            }
        }
        let now = MonotonicClock.now()
        let fileDue = metricsPath != nil && progress.withLock { now - $0.lastMetrics >= metricsInterval }
        let metrics = fileDue || metricsWanted ? self.metrics(up: true) : nil
        if let metricsPath, fileDue, let metrics {
            write(metrics, to: metricsPath, mode: 0o644, isMetrics: true)
            progress.withLock { $0.lastMetrics = now }
        }
        // The sinks that show the status (MQTT's message, the bench page's events) look again when it changed.
        if board.publish(status: snapshot, metrics: metrics, device: device()) {
            for (_, sink) in sinks { sink.wake() }
        }
    }

    /// Replaces one file; logs the first failure and the recovery, once each.
    @discardableResult
    private func write(_ text: String, to path: String, mode: mode_t, isMetrics: Bool) -> Bool {
        var failure: String?
        do {
            try AtomicFile.write(Array(text.utf8), to: path, mode: mode)
        } catch {
            failure = error.description
        }
        let what = isMetrics ? "metrics file" : "status file"
        let previous = progress.withLock { p -> String? in
            let previous = isMetrics ? p.metricsError : p.statusError
            if isMetrics { p.metricsError = failure } else { p.statusError = failure }
            return previous
        }
        if let failure, previous == nil {
            logger.error("cannot write the \(what); retrying", [("path", path), ("error", failure)])
        } else if failure == nil, previous != nil {
            logger.info("the \(what) is written again", [("path", path)])
        }
        return failure == nil
    }

    func snapshot() -> JSONValue {
        let stats = try? spool.stats()
        let tally = pipeline.currentTally
        let lastReads = tally.lastRead.sorted { $0.key < $1.key }.map { device, value in
            (
                device.description,
                JSONValue.object([
                    ("time", .string(Timestamp.format(value.time))), ("outcome", .string(value.outcome.rawValue)),
                ])
            )
        }
        var members: [(String, JSONValue)] = [
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
                        // Damaged files moved aside beside it, and what their salvage recovered (issue 43).
                        ("damaged", SpoolDamageWatch.statusEntry(of: spool.path)),
                    ])
                } ?? .null
            ),
            ("config", configuration()),
            ("location", location()),
            ("clock", StatusReporter.clockEntry(ClockTrust.ofSystem())),
        ]
        // One member per sink ("api", "mqtt"), as docs/contracts.md lists them, and a former name beside its own.
        for (key, sink) in sinks {
            let entry = sink.statusEntry
            members.append((key, entry))
            for alias in SinkRegistry.modules.first(where: { $0.statusKey == key })?.statusAliases ?? [] {
                members.append((alias, entry))
            }
        }
        members += [
            (
                "sources",
                .array(
                    sources.map {
                        .object(
                            [
                                ("kind", .string($0.kind)), ("state", .string($0.state())),
                                ("up", .bool($0.up())),
                            ] + $0.details())
                    })
            ),
            ("reads", .object(tally.reads.sorted { $0.key < $1.key }.map { ($0.key.description, .integer($0.value)) })),
            ("lastReads", .object(lastReads)),
            ("lastError", (tally.lastError ?? stats?.lastError).map(JSONValue.string) ?? .null),
            (
                "metrics",
                metricsPath.map { path in
                    .object([
                        ("path", .string(path)),
                        ("lastError", progress.withLock { $0.metricsError }.map(JSONValue.string) ?? .null),
                    ])
                } ?? .null
            ),
        ]
        return .object(members)
    }

    /// `status`'s `clock`: whether the wall clock that stamps reads is trusted, on what, in words (issue 59).
    static func clockEntry(_ trust: ClockTrust) -> JSONValue {
        .object([
            ("trusted", .bool(trust.isTrusted)), ("source", trust.source.map(JSONValue.string) ?? .null),
            ("state", .string(trust.description)),
        ])
    }

    func metrics(up: Bool) -> String {
        var m = MetricsText()
        m.add("plings_bridge_up", up ? 1 : 0, help: "1 while the service runs")
        // Every source and outcome from the start, at 0 until it happens: a series that appears only with the
        // first read makes rate() and alerts blind to the first minutes.
        let reads = pipeline.currentTally.reads
        var keys = Set(reads.keys)
        for source in sources.map({ SourceKind($0.kind) }) {
            for outcome in Pipeline.Tally.Outcome.allCases {
                keys.insert(Pipeline.Tally.Key(source: source, outcome: outcome))
            }
        }
        for key in keys.sorted() {
            m.add(
                "plings_bridge_reads_total", Double(reads[key] ?? 0),
                labels: [("source", key.source.rawValue), ("outcome", key.outcome.rawValue)],
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
        m.add(
            "plings_bridge_spool_damaged", Double(SpoolDamageWatch.damagedFiles(of: spool.path).count),
            help: "Damaged spool files moved aside beside the spool (their readable scans are copied over; see "
                + "docs/operations.md, \"A damaged spool\")")
        // From the spool: every process's attempts, `scan`'s one attempt included, and across restarts.
        if let totals = try? spool.deliveryTotals() {
            m.add(
                "plings_bridge_delivery_attempts_total", Double(totals.attempts),
                help: "Delivery attempts recorded in the spool (every process)", type: "counter")
            m.add(
                "plings_bridge_delivery_failures_total", Double(totals.failures),
                help: "Recorded delivery attempts that left the scan pending for a retry", type: "counter")
        }
        for (_, sink) in sinks { sink.addMetrics(to: &m) }
        m.add(
            "plings_bridge_clock_trusted", ClockTrust.ofSystem().isTrusted ? 1 : 0,
            help: "1 when the wall clock that stamps reads is trusted (synchronised by NTP, or set from a hardware "
                + "clock at boot); reads stamped with GPS time are trusted either way")
        // Present whenever gpsd is asked: +Inf until the first fix, so "no fix" is a value an alert can see.
        if let age = fixAge() {
            m.add("plings_bridge_gps_fix_age_seconds", age, help: "Age of the latest GPS fix (+Inf before the first)")
        }
        for source in sources {
            m.add(
                "plings_bridge_source_up", source.up() ? 1 : 0, labels: [("source", source.kind)],
                help: "1 when the source has a working device")
        }
        return m.text
    }

}
