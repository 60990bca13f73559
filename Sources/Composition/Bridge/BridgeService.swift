import BridgeCore
import Foundation
import Location
import Logging
import Platform
import SinkKit
import SourceKit
import ReadPipeline
import Spool

/// `plings-bridge run`: wires sources -> pipeline -> spool -> sinks and lives until SIGTERM/SIGINT.
///
/// Every long-running part is a `Service` in one `ServiceGroup`, started in order (location, the sinks,
/// pipeline, sources, retention, status, watchdog) and stopped in reverse against one deadline: sources stop
/// first (no new reads), the pipeline commits what it holds, in-flight deliveries finish or are abandoned.
public final class BridgeService: Sendable {
    public let settings: Settings
    private let logger: Logger
    private let token: String?
    /// Loads the configuration again (same files, environment and flags) for SIGHUP.
    private let reloadSettings: @Sendable () throws -> (Settings, String?)
    /// The configuration in force (the start one, then each successful reload's).
    private let current: Mutex<BridgeConfig>
    /// Which configuration generation runs and what the last reload did (`status`, systemd's STATUS=).
    private let configuration: Mutex<ConfigurationState>

    /// The whole stop, from SIGTERM to exit: inside systemd's default 5 s (the unit allows 10 s).
    public static let stopBudget: Double = 4.5

    public init(
        settings: Settings, token: String?, logger: Logger,
        reload: @escaping @Sendable () throws -> (Settings, String?)
    ) {
        self.settings = settings
        self.token = token
        self.logger = logger
        self.reloadSettings = reload
        self.current = Mutex(settings.config)
        self.configuration = Mutex(ConfigurationState(settings))
    }

    /// Runs until SIGTERM or SIGINT; returns the process exit code.
    public func run() -> Int32 {
        guard let signals = SignalPipe([SIGTERM, SIGINT, SIGHUP]) else {
            logger.error("cannot set up signal handling (no pipe): out of file descriptors?")
            return 1
        }
        SignalPipe.ignoreSIGPIPE()
        // A worker of any part that ends although nobody asked it to (a loop that died) stops the service: one
        // error line naming it, exit 1, and systemd's Restart= starts it again. Never silent.
        let endedWorkers = Mutex<[String]>([])
        // A watched worker that works without a pause for longer than any unit of its work takes (a call that never
        // returns) is hung: the watchdog sees it and it is treated the same way. Worker -> seconds.
        let stuckWorkers = Mutex<[String: Double]>([:])
        WorkerThread.onUnexpectedEnd { worker in
            endedWorkers.withLock { $0.append(worker) }
            signals.post(SignalPipe.workerEnded)
        }
        guard let parts = makeParts() else { return 1 }
        let systemd = SystemdNotifier()
        let watchdog = makeWatchdog(systemd, parts.pipeline, stuckWorkers: stuckWorkers, signals: signals)
        // Starting blocks (a source waits for its devices): on this thread, which is not Swift's cooperative pool.
        parts.group.start()
        logSummary(spool: parts.spool, sources: parts.sources)
        // What an earlier run moved aside and could not finish salvaging.
        parts.damageWatch.salvageLeftovers()
        systemd.notify("READY=1\nSTATUS=" + configuration.withLock { $0.systemdStatus })
        // The watchdog's first ping must not come before READY=1: it starts last and stops first.
        watchdog?.start()

        let exitCode = serve(signals, parts, systemd: systemd, ended: endedWorkers, stuck: stuckWorkers)

        systemd.notify("STOPPING=1")
        let deadline = MonotonicClock.deadline(after: BridgeService.stopBudget)
        watchdog?.stop(deadline: deadline)
        let overdue = parts.group.stop(deadline: deadline)
        parts.damageWatch.stop()
        if !overdue.isEmpty {
            logger.warn("stop deadline passed; exiting anyway", [("late", overdue.joined(separator: ","))])
        }
        // Everything committed goes into the file now, through this process's own index of the WAL, which leaves
        // the WAL empty: the next process to open the spool reads no WAL. A WAL left behind with a torn frame (a
        // worn card) would be read only up to the tear, silently losing every commit after it (docs/reliability.md,
        // "Known limits"); copied in by us, the tear is in the file, where the next start's check finds it.
        parts.spool.checkpointAtStop()
        logger.info("stopped")
        return exitCode
    }

    /// The service's parts, made in the order data flows, none started.
    struct Parts {
        let spool: Spool
        let damageWatch: SpoolDamageWatch
        let sinks: [(key: String, sink: any ScanSink)]
        let pipeline: Pipeline
        let sources: SourceSet
        let location: LocationSlot
        let reporter: StatusReporter
        /// Layers, started first to last and stopped last to first; the parts of one layer stop together. The
        /// sinks start before the pipeline, so every read from now on is queued for the broker too; the sources
        /// stop before the pipeline, which then commits what it holds before the sinks stop.
        let group: ServiceGroup
    }

    /// Makes every part. The status is one `StatusBoard`, made first: the reporter builds it from the parts, the
    /// sinks that publish it read it, and every part says there when something in it changed; so no part waits
    /// for another to be bound later. Nil (logged) when the spool cannot be opened.
    private func makeParts() -> Parts? {
        let config = settings.config
        let spool: Spool
        do {
            spool = try Spool(path: settings.spoolPath, synchronous: config.spool.synchronous)
        } catch {
            logger.error("cannot open the spool", [("path", settings.spoolPath), ("error", error.description)])
            return nil
        }
        let board = StatusBoard()
        // A damaged spool file is moved aside and salvaged in the background (issue 43); the status follows, and
        // the sinks look, after its build, for the scans the salvage copied back that they still owe.
        let damageWatch = SpoolDamageWatch(spool: spool, logger: logger, background: true, changed: board.changed)
        let location = LocationSlot(config: config, logger: logger)
        let sinkContext = SinkContext(
            spool: spool, logger: logger, configuration: SinkConfiguration(config: config, apiToken: token),
            board: board)
        let sinks = SinkRegistry.modules.map { (key: $0.statusKey, sink: $0.make(sinkContext)) }
        // Scans other processes commit (`scan`, `spool retry`) wake the sinks, without a periodic look.
        let spoolWatch = SpoolChangeWatch(spool: spool) { for (_, sink) in sinks { sink.wake() } }
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: config.hosts)),
            fixProvider: location, debounce: SourceSet.debounceWindows(config), logger: logger,
            onCommitted: { _ in
                for (_, sink) in sinks { sink.wake() }
                board.changed()
            }, timeSource: { location.readTime(now: $0) })
        let sources = SourceSet(
            config: config, logger: logger, commit: { pipeline.commit($0, then: $1) }, stateChanged: board.changed)
        let reporterSources = sources.reporterSources
        let current = self.current
        let configuration = self.configuration
        // A purge at the stop ends between two batches (during a drain it follows the deliveries for a while).
        let retentionStop = SpoolWorkStop()
        let retention = PeriodicThread(name: "retention", interval: 3600, interrupt: retentionStop.stop) { [self] in
            pruneDelivered(spool, stop: retentionStop)
        }
        // The whole spool file checked at start and daily, at the lowest priority (issue 43).
        // A check still running at the stop ends there (the next start checks again): at the lowest priority on a
        // busy box it could otherwise hold the stop past its deadline, with the sinks' answers unrecorded.
        let integrity = PeriodicThread(
            name: "spool-check", interval: SpoolDamageWatch.checkInterval, interrupt: damageWatch.stopChecking
        ) { damageWatch.checkNow() }
        let reporter = StatusReporter(
            statusPath: settings.statusPath, metricsPath: config.metrics.textfile,
            metricsInterval: config.metrics.interval, spool: spool,
            pipeline: pipeline, sinks: sinks, sources: reporterSources,
            fixAge: { location.client.map { $0.status().fixAge ?? .infinity } }, location: { location.snapshot() },
            configuration: { configuration.withLock { $0.json } },
            device: {
                BridgeService.deviceStatus(
                    spool: spool, pipeline: pipeline, sources: reporterSources, gps: location.client,
                    config: current.withLock { $0 })
            }, board: board, logger: logger)
        reporter.prime()
        let group = ServiceGroup(
            layers: [
                [location], sinks.map(\.sink) + [spoolWatch], [pipeline], [sources, retention, integrity, reporter],
            ])
        return Parts(
            spool: spool, damageWatch: damageWatch, sinks: sinks, pipeline: pipeline, sources: sources,
            location: location, reporter: reporter, group: group)
    }

    /// The watchdog pings at half its period while the pipeline's commit thread is not stuck in a commit and no
    /// watched worker is stuck in a call (`WorkerActivity`); a wedged pipeline stops the pings and systemd
    /// restarts the service. A stuck worker also stops the service itself (exit 1, the worker named), and the
    /// missing pings end it should that stop hang too. Nil when systemd asks for no watchdog.
    private func makeWatchdog(
        _ systemd: SystemdNotifier, _ pipeline: Pipeline, stuckWorkers: Mutex<[String: Double]>, signals: SignalPipe
    ) -> PeriodicThread? {
        systemd.watchdogInterval.map { interval in
            PeriodicThread(name: "watchdog", interval: interval / 2) {
                let stuck = WorkerActivity.stuck(now: MonotonicClock.now())
                guard stuck.isEmpty else {
                    let first = stuckWorkers.withLock { known -> Bool in
                        defer { for (name, working) in stuck { known[name] = working } }
                        return known.isEmpty
                    }
                    if first { signals.post(SignalPipe.workerEnded) }
                    return
                }
                if pipeline.isResponsive(within: interval / 4) { systemd.notify("WATCHDOG=1") }
            }
        }
    }

    /// Idle until a signal: nothing runs here (every part sleeps on its own thread; this one in `read`). SIGHUP
    /// reloads; SIGTERM and SIGINT end it (exit 0); a part that ended or is stuck ends it with exit 1.
    private func serve(
        _ signals: SignalPipe, _ parts: Parts, systemd: SystemdNotifier, ended: Mutex<[String]>,
        stuck: Mutex<[String: Double]>
    ) -> Int32 {
        while let number = signals.next() {
            if number == SignalPipe.workerEnded {
                let stuck = stuck.withLock { $0 }.sorted { $0.key < $1.key }
                if stuck.isEmpty {
                    logger.error(
                        "a part of the service stopped on its own; stopping the service so that it is started again",
                        [("worker", ended.withLock { $0 }.joined(separator: ","))])
                } else {
                    logger.error(
                        "a part of the service is stuck in a call that does not return; stopping the service so "
                            + "that it is started again",
                        [
                            ("worker", stuck.map(\.key).joined(separator: ",")),
                            ("seconds", stuck.map { String(Int($0.value)) }.joined(separator: ",")),
                        ])
                }
                return 1
            }
            if number == SIGHUP {
                // systemd shows "reloading" until READY=1; `plings-bridge reload` (ExecReload=) waits for the
                // status file's new generation, written before READY=1.
                systemd.notify("RELOADING=1\nMONOTONIC_USEC=\(UInt64(MonotonicClock.now() * 1_000_000))")
                reload(
                    sinks: parts.sinks.map(\.sink), pipeline: parts.pipeline, sources: parts.sources,
                    location: parts.location)
                parts.reporter.refresh()
                systemd.notify("READY=1\nSTATUS=" + configuration.withLock { $0.systemdStatus })
                continue
            }
            logger.info("stopping", [("signal", number == SIGTERM ? "SIGTERM" : "SIGINT")])
            return 0
        }
        return 0
    }

    /// SIGHUP: reload the configuration. Each sink applies its own part (adding or removing `api.url` starts or
    /// stops delivery; a new token reaches it; a delivery pause ends), and hosts, sources and retention apply at
    /// once. Keys read only at start are named in one log line.
    private func reload(sinks: [any ScanSink], pipeline: Pipeline, sources: SourceSet, location: LocationSlot) {
        do {
            let (fresh, freshToken) = try reloadSettings()
            let previous = current.withLock { old -> BridgeConfig in
                defer { old = fresh.config }
                return old
            }
            pipeline.update(
                builder: ScanBuilder(parser: PlingsURLParser(hosts: fresh.config.hosts)),
                debounce: SourceSet.debounceWindows(fresh.config))
            for sink in sinks { sink.apply(SinkConfiguration(config: fresh.config, apiToken: freshToken)) }
            sources.apply(fresh.config)
            if location.apply(fresh.config) {
                logger.info("location", [("state", BridgeService.describeLocation(fresh.config))])
            }
            for (kind, state) in sources.summaries { logger.info("source \(kind)", [("state", state)]) }
            let needRestart =
                BridgeService.keysNeedingRestart(from: previous, to: fresh.config)
                + (fresh.spoolPath != settings.spoolPath ? ["spool.path"] : [])
            if !needRestart.isEmpty {
                logger.warn(
                    "changed keys take effect only after a restart (systemctl restart plings-bridge)",
                    [("keys", needRestart.joined(separator: ","))])
            }
            configuration.withLock { $0.applied(fresh) }
            logger.info("configuration reloaded", [("config", fresh.configPath ?? "(built-in defaults)")])
        } catch {
            let reason = "\(error)"
            configuration.withLock { $0.refused(reason) }
            logger.error("reload refused: the service keeps running on the previous configuration", [("error", reason)])
        }
    }

    /// The keys a reload cannot apply to a running service (docs/configuration.md marks them): the core ones here,
    /// then each registered section's.
    static func keysNeedingRestart(from old: BridgeConfig, to new: BridgeConfig) -> [String] {
        var keys = ConfigRegistry.sections.flatMap { $0.keysNeedingRestart(from: old, to: new) }
        if old.spool.synchronous != new.spool.synchronous { keys.append("spool.synchronous") }
        if old.metrics != new.metrics { keys.append("metrics") }
        return keys
    }

    /// Deletes the scans every sink that queued them finished with (delivered or dead) longer ago than
    /// `spool.deliveredRetention` (hourly, on the retention thread). Pending, kept and unrecognized scans stay.
    private func pruneDelivered(_ spool: Spool, stop: SpoolWorkStop) {
        let retention = current.withLock { $0.spool.deliveredRetention }
        let cutoff = Date().addingTimeInterval(-retention)
        let started = MonotonicClock.now()
        if let pruned = try? spool.purgeDelivered(before: cutoff, stop: stop), pruned > 0 {
            logger.info(
                "pruned delivered scans",
                [("count", String(pruned)), ("seconds", String(format: "%.2f", MonotonicClock.now() - started))])
        }
    }

    private func logSummary(spool: Spool, sources: SourceSet) {
        let config = settings.config
        logger.info(
            "plings-bridge starting",
            [("version", BridgeVersion.current), ("config", settings.configPath ?? "(built-in defaults)")])
        if let fields = spool.migrationLogFields { logger.info("spool migrated", fields) }
        let counts = (try? spool.stats())?.counts ?? [:]
        logger.info(
            "spool open",
            [
                ("path", spool.path), ("pending", String(counts[.pending] ?? 0)),
                ("delivered", String(counts[.delivered] ?? 0)), ("dead", String(counts[.dead] ?? 0)),
                ("unrecognized", String(counts[.unrecognized] ?? 0)),
            ])
        // Each sink says it starts; with none, the spool is where scans go (docs/contracts.md, `kept`).
        if SinkRegistry.modules.allSatisfy({ $0.queue(config) == nil }) {
            logger.info("no sink is configured: scans are kept in the spool (the spool is their destination)")
        }
        logger.info("location", [("state", BridgeService.describeLocation(config))])
        for (kind, state) in sources.summaries { logger.info("source \(kind)", [("state", state)]) }
        logger.info("ready: waiting for reads; SIGTERM or Ctrl-C stops")
    }

    static func describeLocation(_ config: BridgeConfig) -> String {
        guard config.location.enabled else { return "disabled: scans carry no position" }
        var text = "gpsd at \(config.location.gpsd) (fix used while younger than \(config.location.maxFixAge) s)"
        if let fixed = config.location.fixed {
            text += ", else the fixed position \(fixed.latitude),\(fixed.longitude)"
        }
        return text
    }
}

extension BridgeService {
    /// The fields of a sink's device status (the retained `<base>/status` message of MQTT besides `online`,
    /// docs/contracts.md): only what changes with the device's health, so the message is republished on change,
    /// not on every read's timestamp. `unpublished`, what the publishing sink's queue still holds, is its own
    /// (`SinkContext.deviceStatus`).
    static func deviceStatus(
        spool: Spool, pipeline: Pipeline, sources: [StatusReporter.Source], gps: GPSClient?, config: BridgeConfig
    ) -> JSONValue {
        let counts = (try? spool.stats())?.counts ?? [:]
        let lastRead = pipeline.currentTally.lastRead.values.map(\.time).max()
        let fix: String = {
            guard config.location.enabled else { return "disabled" }
            if let gps, gps.status().fresh { return "gps" }
            return config.location.fixed != nil ? "fixed" : "none"
        }()
        return .object([
            ("version", .string(BridgeVersion.current)),
            ("sources", .object(sources.map { ($0.kind, .bool($0.up())) })),
            (
                "spool",
                .object([
                    ("pending", .integer(counts[.pending] ?? 0)),
                    // Damaged files moved aside beside the spool (issue 43): the card is wearing out.
                    ("damaged", .integer(SpoolDamageWatch.damagedFiles(of: spool.path).count)),
                ])
            ),
            ("lastReadAt", lastRead.map { .string(Timestamp.format($0)) } ?? .null),
            ("fix", .string(fix)),
        ])
    }
}
