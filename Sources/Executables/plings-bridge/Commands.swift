import Bridge
import BridgeCore
import PlingsAPI
import Foundation
import Location
import NFC
import Logging
import Platform
import Spool

/// The failure a command ends with, mapped to its exit code.
enum CommandFailure: Error, CustomStringConvertible {
    case usage(String)
    case config(String)
    case runtime(String)

    /// The plain message: a log line or a reload's reason shows it as it is (never an enum dump).
    var description: String {
        switch self {
        case .usage(let message), .runtime(let message): message
        case .config(let message): "configuration error: " + message
        }
    }
}

struct CLI {
    let logger = Logger.shared
    let environment = ProcessInfo.processInfo.environment

    func main(_ argv: [String]) -> Int32 {
        let args = argv.dropFirst()
        guard let name = args.first else {
            print(CLI.mainHelp)
            return 2
        }
        do {
            guard let command = CLI.command(named: name) else {
                throw CommandFailure.usage("unknown command '\(name)'")
            }
            switch command.handler {
            case .raw(let handler):
                return handler(self, args.dropFirst())
            case .parsed(let handler):
                let parsed = try Arguments(args.dropFirst(), for: command)
                if parsed.wantsHelp {
                    print(command.help)
                    return 0
                }
                return try handler(self, parsed)
            }
        } catch let failure as CommandFailure {
            switch failure {
            case .usage(let message):
                logger.error(message, [("hint", "plings-bridge --help")])
                return 2
            case .config:
                logger.error(failure.description)
                return 2
            case .runtime(let message):
                logger.error(message)
                return 1
            }
        } catch let error as UsageError {
            logger.error(error.message, [("hint", "plings-bridge \(name) --help")])
            return 2
        } catch {
            logger.error("\(error)")
            return 1
        }
    }

    /// Loads the configuration layers (file, environment, the command's flags) and applies `--log-level`.
    func settings(_ args: Arguments) throws -> Settings {
        if let level = args.value("--log-level") {
            guard let parsed = ["debug": LogLevel.debug, "info": .info, "warn": .warn, "error": .error][level] else {
                throw CommandFailure.usage("--log-level must be debug, info, warn or error")
            }
            logger.minimum = parsed
        }
        do {
            return try Settings.load(
                configPath: args.value("--config"), flags: args.configFlags, environment: environment)
        } catch {
            throw CommandFailure.config(error.description)
        }
    }

    /// The settings of an inspection command (`status`, `spool list|stats|export`): a broken configuration file
    /// must not blind the tools while the service runs on its previous one. The error becomes one warning line
    /// and the command looks where the installed service keeps its spool and status (or the usual default).
    func inspectionSettings(_ args: Arguments) throws -> Settings {
        do {
            return try settings(args)
        } catch CommandFailure.config(let message) {
            let fallback = Settings.withoutConfigFile(spoolPath: args.value("--spool"), environment: environment)
            logger.warn(
                "the configuration is refused; inspecting \(fallback.spoolPath) instead",
                [("error", message), ("fix", "plings-bridge config check")])
            return fallback
        }
    }

    // MARK: run

    func run(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("run takes no arguments") }
        let settings = try settings(args)
        let token = try loadToken(settings)
        if let token { logger.addSecret(token) }
        let reload: @Sendable () throws -> (Settings, String?) = {
            let cli = CLI()
            let fresh = try cli.settings(args)
            let freshToken = try cli.loadToken(fresh)
            if let freshToken { Logger.shared.addSecret(freshToken) }
            return (fresh, freshToken)
        }
        return BridgeService(settings: settings, token: token, logger: logger, reload: reload).run()
    }

    /// The token (see `TokenSource`); its warnings (a token file others can read) are logged once.
    func loadToken(_ settings: Settings, logWarnings: Bool = true) throws -> String? {
        do {
            return try TokenSource.load(config: settings.config, environment: environment) { warning in
                if logWarnings { logger.warn(warning.message, [("fix", warning.fix)]) }
            }
        } catch {
            throw CommandFailure.config(error.description)
        }
    }

    /// `scan`'s token. On an installed box an operator often may not read the service's token: a token file
    /// owned by the service user (group plings members), or a systemd credential (configs from 0.1.0) that only
    /// the unit sees. That is not an error for `scan`: the read is spooled and the running service, which notices
    /// the commit at once, delivers it. Root reads a token file and makes the one attempt itself. Elsewhere an
    /// `api.url` without a token stays a configuration error.
    func scanToken(_ settings: Settings) throws -> String? {
        var lookupConfig = settings.config
        if settings.isInstalledSystem { lookupConfig.api.url = nil }  // absent is not an error here
        let lookup: TokenSource.Lookup
        do {
            lookup = try TokenSource.resolve(config: lookupConfig, environment: environment)
        } catch {
            throw CommandFailure.config(error.description)
        }
        for warning in lookup.warnings { logger.warn(warning.message, [("fix", warning.fix)]) }
        if settings.config.api.url != nil, lookup.token == nil {
            var fields: [(String, String)] = []
            if case .unreadable(let path) = lookup.state { fields.append(("tokenFile", path)) }
            logger.info(
                "this user cannot read the service's API token: the scan is spooled and the running service delivers it",
                fields)
        }
        return lookup.token
    }

    // MARK: scan

    /// What `scan --source` records: every registered read source's kind, and `manual`.
    static var sourceKinds: [String] { SourceRegistry.modules.map(\.kind.rawValue) + [SourceKind.manual.rawValue] }

    func scan(_ args: Arguments) throws -> Int32 {
        guard args.positional.count == 1 else {
            throw CommandFailure.usage("scan takes exactly one TEXT argument (use '' for an empty read)")
        }
        var kind = SourceKind.manual
        if let source = args.value("--source") {
            let known = CLI.sourceKinds
            guard known.contains(source) else {
                throw CommandFailure.usage(
                    "--source must be \(known.dropLast().joined(separator: ", ")) or \(known.last ?? "manual")")
            }
            kind = SourceKind(source)
        }
        let settings = try settings(args)
        let token = try scanToken(settings)
        if let token { logger.addSecret(token) }
        let scan = OneShotScan(settings: settings, logger: logger)
        let capture = scan.capture(
            args.positional[0], kind: kind, device: args.value("--device") ?? "cli", locationLogger: quietLogger())
        if args.has("--dry-run") {
            switch scan.requestBody(capture) {
            case .body(let body): print(body)
            case .unrecognized(let reason):
                logger.warn("read is unrecognized: nothing would be sent", [("reason", reason)])
            }
            return 0
        }
        let spool = try openSpool(settings, create: true)
        switch scan.commit(capture, to: spool, token: token) {
        case .accepted(let scan):
            let record = try? spool.record(id: scan.id)
            let sinks = (try? spool.sinkStates(ids: [scan.id]))?[scan.id] ?? [:]
            print((record.map { CLI.listed($0, sinks: sinks) } ?? .string(scan.id)).encoded())
            return 0
        case .debounced:
            return 0
        case .refused:
            // The pipeline said why in its one line (`read refused: could not commit to the spool`, as the service
            // says it); a second line would tell the same refusal twice.
            return 1
        }
    }

    /// gpsd's connection lines would only add noise to a one-shot command: errors only (unless debugging).
    func quietLogger() -> Logger { Logger(minimum: logger.minimum == .debug ? .debug : .error) }

    func openSpool(_ settings: Settings, create: Bool) throws -> Spool {
        let path = settings.spoolPath
        try requirePermission(path, what: "the spool", write: true)
        let existed = access(path, F_OK) == 0
        let spool: Spool
        do {
            spool = try Spool(path: path, synchronous: settings.config.spool.synchronous)
        } catch {
            throw CommandFailure.runtime("cannot open the spool at \(path): \(error.description)")
        }
        if !existed { handOverToDirectoryOwner(path) }
        if let fields = spool.migrationLogFields { logger.info("spool migrated", fields) }
        // A damaged file found by this command is moved aside and salvaged before the command ends (issue 43).
        let watch = SpoolDamageWatch(spool: spool, logger: logger, background: false)
        commandDamageWatches.withLock { $0.append(watch) }
        return spool
    }

    /// Fails with one clear line when `path` exists (or would be created) where this user may not read (or
    /// write) it: on an installed box that is the service's spool or status file, for root and group plings.
    func requirePermission(_ path: String, what: String, write: Bool) throws {
        let directory = (path as NSString).deletingLastPathComponent
        var denied = access(directory, X_OK) != 0 && errno == EACCES
        if !denied, access(path, F_OK) == 0 {
            denied = access(path, write ? R_OK | W_OK : R_OK) != 0 && errno == EACCES
        } else if !denied, write {
            denied = access(directory, W_OK) != 0 && errno == EACCES
        }
        guard denied else { return }
        throw CommandFailure.runtime(
            "cannot \(write ? "write" : "read") \(what) at \(path): permission denied; run as root or as a member of "
                + "group \(Settings.serviceGroup) (usermod -aG \(Settings.serviceGroup) USER, then log in again)")
    }

    /// A spool root creates in a directory another user owns (the service's, before it ever ran) is handed to
    /// that owner, or the service could not open it. SQLite gives the WAL files the database's owner itself.
    func handOverToDirectoryOwner(_ path: String) {
        guard geteuid() == 0 else { return }
        var directory = stat()
        guard stat((path as NSString).deletingLastPathComponent, &directory) == 0, directory.st_uid != 0 else { return }
        for file in [path, path + "-wal", path + "-shm"] where access(file, F_OK) == 0 {
            _ = chown(file, directory.st_uid, directory.st_gid)
        }
    }

    // MARK: version

    func version(_ args: Arguments) throws -> Int32 {
        let libraries: [(String, String)] = [
            ("sqlite", sqliteLibraryVersion), ("curl", OneShotDelivery.curlVersion),
            ("pcsclite", NFCReaders.pcscLiteVersion), ("libgps API", LocationSource.libgpsAPIVersion),
        ]
        if args.json {
            let json = JSONValue.object(
                [
                    ("version", .string(BridgeVersion.current)),
                    ("libraries", .object(libraries.map { ($0.0, .string($0.1)) })),
                ])
            print(json.encoded())
        } else {
            print("plings-bridge \(BridgeVersion.current)")
            for (name, version) in libraries { show("  \(name) \(version)") }
        }
        return 0
    }
}

/// Prints one line of human-readable output with control characters escaped (`TerminalText`). Every such line
/// goes through here: outside text (a read, a reader name, an API error) cannot forge rows or drive the
/// terminal. The lines' own words have no controls or backslashes, so only outside text changes. `--json`
/// output is printed as it is: JSON escaping keeps it exact.
func show(_ line: String) { print(TerminalText.escape(line)) }

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}

/// Durations as people type and read them: `7d`, `12h`, `30m`, `45s` or plain seconds.
enum DurationText {
    /// 0001-01-01T00:00:00Z, the earliest time RFC 3339 (four-digit years) can write.
    static let yearOne = Date(timeIntervalSince1970: -62_135_596_800)

    /// Seconds, or nil for text that is not a finite age >= 0 (`inf`, `nan`, `1e999d` are refused).
    static func parse(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        var seconds: Double?
        if let last = text.last, let unit = units[last], let n = Double(text.dropLast()) {
            seconds = n * unit
        } else {
            seconds = Double(text)
        }
        guard let seconds, seconds.isFinite, seconds >= 0 else { return nil }
        return seconds
    }

    /// The longest wait a timer can take: timers count nanoseconds in 64 bits (about 292 years), and Swift's
    /// `Duration` from a larger number of seconds traps.
    static let maximumWait: Double = 9e9

    /// A `--timeout`/`--duration` value: seconds, > 0 and at most `maximumWait`.
    static func wait(_ text: String, flag: String) throws -> Double {
        guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= maximumWait else {
            throw CommandFailure.usage("\(flag) must be a number of seconds above 0 and at most 9e9, not '\(text)'")
        }
        return seconds
    }

    static func describe(_ seconds: Double) -> String {
        if seconds < 120 { return "\(Int(seconds))s" }
        if seconds < 7200 { return "\(Int(seconds / 60))m" }
        if seconds < 172_800 { return "\(Int(seconds / 3600))h" }
        return "\(Int(seconds / 86_400))d"
    }
}

/// The damage watches of the spools commands opened: kept for the process's life (a spool holds its watch weakly).
private let commandDamageWatches = Mutex<[SpoolDamageWatch]>([])
