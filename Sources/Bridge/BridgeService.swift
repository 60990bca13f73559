import BridgeCore
import Forwarder
import Foundation
import Location
import Logging
import Spool

/// `plings-bridge run`: wires sources -> pipeline -> spool -> forwarder and lives until SIGTERM/SIGINT.
public final class BridgeService: Sendable {
    public let settings: Settings
    private let logger: Logger
    private let token: String?
    /// Loads the configuration again (same files, environment and flags) for SIGHUP.
    private let reloadSettings: @Sendable () throws -> (Settings, String?)

    public init(
        settings: Settings, token: String?, logger: Logger,
        reload: @escaping @Sendable () throws -> (Settings, String?)
    ) {
        self.settings = settings
        self.token = token
        self.logger = logger
        self.reloadSettings = reload
    }

    /// Runs until SIGTERM or SIGINT; returns the process exit code.
    public func run() async -> Int32 {
        let config = settings.config
        let signals = SignalStream.make([SIGTERM, SIGINT, SIGHUP])
        SignalStream.ignoreSIGPIPE()

        let spool: Spool
        do {
            spool = try Spool(path: settings.spoolPath, synchronous: config.spool.synchronous)
        } catch {
            logger.error("cannot open the spool", [("path", settings.spoolPath), ("error", error.description)])
            return 1
        }
        let (fixProvider, gps) = LocationSource.makeFixProvider(config: config, logger: logger)
        let forwarder = settings.apiSettings(token: token).map { Forwarder(spool: spool, settings: $0, logger: logger) }
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: config.hosts)),
            fixProvider: fixProvider, debounce: BridgeService.debounceWindows(config), logger: logger,
            onCommitted: { _ in forwarder?.wake() }, timeSource: { gps?.readTime(now: $0) ?? $0 })
        forwarder?.start()
        let sources = SourceSet(logger: logger, submit: { pipeline.submit($0) })
        sources.apply(config)
        let retention = Task { await pruneDelivered(spool: spool, every: 3600) }
        let reporter = StatusReporter(
            statusPath: StatusReporter.statusPath(
                spoolPath: spool.path, environment: ProcessInfo.processInfo.environment),
            metricsPath: config.metrics.textfile, spool: spool, pipeline: pipeline, forwarder: forwarder,
            sources: sources.reporterSources, fixAge: { gps?.status().fixAge })
        let reporting = Task { await reporter.run(interval: 5, metricsInterval: config.metrics.interval) }

        logSummary(spool: spool, sources: sources)
        let systemd = SystemdNotifier()
        systemd.notify("READY=1\nSTATUS=" + (config.api.url == nil ? "spooling locally" : "delivering to the API"))
        let watchdog = Task { await feedWatchdog(systemd, pipeline: pipeline) }

        // Idle: nothing runs until a signal arrives (the forwarder sleeps on its own thread).
        for await number in signals {
            if number == SIGHUP {
                reload(forwarder: forwarder, pipeline: pipeline, sources: sources)
                continue
            }
            logger.info("stopping", [("signal", number == SIGTERM ? "SIGTERM" : "SIGINT")])
            break
        }
        systemd.notify("STOPPING=1")
        retention.cancel()
        watchdog.cancel()
        reporting.cancel()
        // Sources first (no new reads), then the reads already submitted are committed, then in-flight
        // deliveries finish or are abandoned: all within systemd's 5 s.
        sources.stop()
        pipeline.stop(timeout: 2)
        forwarder?.stop(timeout: 2.5)
        gps?.stop()
        reporter.clear()
        logger.info("stopped")
        return 0
    }

    /// SIGHUP: reload the configuration. API settings and hosts apply at once; an auth pause ends.
    private func reload(forwarder: Forwarder?, pipeline: Pipeline, sources: SourceSet) {
        do {
            let (fresh, freshToken) = try reloadSettings()
            pipeline.update(
                builder: ScanBuilder(parser: PlingsURLParser(hosts: fresh.config.hosts)),
                debounce: BridgeService.debounceWindows(fresh.config))
            if let forwarder, let api = fresh.apiSettings(token: freshToken) {
                forwarder.reload(settings: api)
            }
            sources.apply(fresh.config)
            for (kind, state) in sources.summaries { logger.info("source \(kind)", [("state", state)]) }
            logger.info("configuration reloaded", [("config", fresh.configPath ?? "(built-in defaults)")])
        } catch {
            logger.error("reload failed: keeping the running configuration", [("error", "\(error)")])
        }
    }

    /// Pings systemd's watchdog at half its period while the pipeline's commit thread answers; a wedged
    /// pipeline stops the pings and systemd restarts the service.
    private func feedWatchdog(_ systemd: SystemdNotifier, pipeline: Pipeline) async {
        guard let interval = systemd.watchdogInterval else { return }
        while !Task.isCancelled {
            if pipeline.isResponsive(within: interval / 4) { systemd.notify("WATCHDOG=1") }
            try? await Task.sleep(for: .seconds(interval / 2))
        }
    }

    /// Deletes delivered scans older than `spool.deliveredRetention`, hourly. Nothing else is ever pruned.
    private func pruneDelivered(spool: Spool, every interval: Double) async {
        while !Task.isCancelled {
            let cutoff = Date().addingTimeInterval(-settings.config.spool.deliveredRetention)
            if let pruned = try? spool.purgeDelivered(before: cutoff), pruned > 0 {
                logger.info("pruned delivered scans", [("count", String(pruned))])
            }
            try? await Task.sleep(for: .seconds(interval))
        }
    }

    private func logSummary(spool: Spool, sources: SourceSet) {
        let config = settings.config
        logger.info(
            "plings-bridge starting",
            [("version", BridgeVersion.current), ("config", settings.configPath ?? "(built-in defaults)")])
        let counts = (try? spool.stats())?.counts ?? [:]
        logger.info(
            "spool open",
            [
                ("path", spool.path), ("pending", String(counts[.pending] ?? 0)),
                ("delivered", String(counts[.delivered] ?? 0)), ("dead", String(counts[.dead] ?? 0)),
                ("unrecognized", String(counts[.unrecognized] ?? 0)),
            ])
        if let url = config.api.url {
            logger.info(
                "scans go to the API", [("url", url), ("concurrency", String(config.api.concurrency))])
        } else {
            logger.info("scans go to the local spool only (no api.url configured)")
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

    public static func debounceWindows(_ config: BridgeConfig) -> [SourceKind: Double] {
        [.nfc: config.nfc.debounce, .hid: config.hid.debounce, .manual: 0]
    }
}
