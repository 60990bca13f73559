import BridgeCore
import Foundation
import Logging
import Spool

/// `plings-bridge run`: wires sources -> pipeline -> spool -> forwarder and lives until SIGTERM/SIGINT.
public final class BridgeService: Sendable {
    public let settings: Settings
    private let logger: Logger

    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
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
        let fixProvider = BridgeService.fixProvider(for: config)
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: config.hosts)),
            fixProvider: fixProvider, debounce: BridgeService.debounceWindows(config), logger: logger)

        logSummary(spool: spool)

        // Idle: nothing runs until a signal arrives (no timers, no polling).
        for await number in signals {
            if number == SIGHUP {
                logger.info("SIGHUP: configuration reload is not supported yet; keeping the running configuration")
                continue
            }
            logger.info("stopping", [("signal", number == SIGTERM ? "SIGTERM" : "SIGINT")])
            break
        }
        pipeline.stop()
        logger.info("stopped")
        return 0
    }

    private func logSummary(spool: Spool) {
        let config = settings.config
        logger.info(
            "plings-bridge starting",
            [("version", BridgeVersion.current), ("config", settings.configPath ?? "(built-in defaults)")])
        let counts = (try? spool.stats())?.counts ?? [:]
        logger.info(
            "spool open",
            [("path", spool.path), ("pending", String(counts[.pending] ?? 0)),
             ("delivered", String(counts[.delivered] ?? 0)), ("dead", String(counts[.dead] ?? 0)),
             ("unrecognized", String(counts[.unrecognized] ?? 0))])
        if let url = config.api.url {
            logger.info("scans go to the API", [("url", url)])
        } else {
            logger.info("scans go to the local spool only (no api.url configured)")
        }
        logger.info("location", [("state", BridgeService.describeLocation(config))])
        logger.info("source nfc", [("state", config.nfc.enabled ? "not available in this build" : "disabled")])
        logger.info("source hid", [("state", config.hid.enabled ? "not available in this build" : "disabled")])
        logger.info("ready: waiting for reads; SIGTERM or Ctrl-C stops")
    }

    static func describeLocation(_ config: BridgeConfig) -> String {
        guard config.location.enabled else { return "disabled: scans carry no position" }
        if let fixed = config.location.fixed {
            return "fixed position \(fixed.latitude),\(fixed.longitude)"
        }
        return "no position source: scans carry no position"
    }

    /// The fix seam: a fresh GPS fix first (when built), then the configured fixed location; nothing when
    /// location is disabled.
    public static func fixProvider(for config: BridgeConfig) -> any FixProvider {
        guard config.location.enabled else { return NoFixProvider() }
        if let fixed = config.location.fixed { return FixedFixProvider(fix: fixed) }
        return NoFixProvider()
    }

    public static func debounceWindows(_ config: BridgeConfig) -> [SourceKind: Double] {
        [.nfc: config.nfc.debounce, .hid: config.hid.debounce, .manual: 0]
    }
}
