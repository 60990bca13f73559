import BridgeCore
import PlingsAPI
import Foundation
import HID
import SinkKit
import SourceKit

/// Loads the configuration as docs/contracts.md, "Configuration" says: JSON file, then environment, then flags.
public struct Settings: Sendable {
    public static let defaultConfigPath = "/etc/plings-bridge/config.json"
    /// The installed service's spool (`StateDirectory=plings-bridge`) and status file (`RuntimeDirectory=`).
    public static let serviceSpoolPath = "/var/lib/plings-bridge/spool.sqlite"
    public static let serviceStatusPath = "/run/plings-bridge/status.json"
    /// The group that may use the installed service's spool and status (the service's own group).
    public static let serviceGroup = "plings"

    public var config: BridgeConfig
    /// The file that was read, if any.
    public var configPath: String?
    public var spoolPath: String
    /// Where the running service keeps its status snapshot (`status`, `doctor`).
    public var statusPath: String
    /// True when the configuration in use is the installed system's (`/etc/plings-bridge/config.json`): every
    /// command then defaults to the service's spool and status file, so an operator on the box sees what the
    /// service sees.
    public var isInstalledSystem: Bool { configPath == Settings.defaultConfigPath }

    /// - Parameters:
    ///   - configPath: `--config`; when nil, `PLINGS_BRIDGE_CONFIG`, then the default path when it exists.
    ///   - flags: flag name, config key and the flag's text, in command-line order.
    public static func load(
        configPath: String?, flags: [(flag: String, path: String, value: JSONValue)],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigError) -> Settings {
        var loader = ConfigLoader(sections: ConfigRegistry.sections)
        var path = configPath ?? environment["PLINGS_BRIDGE_CONFIG"]
        if path == nil, FileManager.default.fileExists(atPath: defaultConfigPath) { path = defaultConfigPath }
        if let path {
            switch try BoundedFile.read(path, what: "config file") {
            case .read(let bytes, _): try loader.applyFile(bytes, origin: path)
            case .missing: throw ConfigError("config file \(path) does not exist")
            case .denied: throw ConfigError("cannot read config file \(path): permission denied")
            }
        }
        try loader.applyEnvironment(environment)
        for (flag, key, value) in flags {
            if case .string(let text) = value {
                try loader.applyFlag(flag, path: key, text: text)
            } else {
                try loader.applyFlag(flag, path: key, value: value)
            }
        }
        let config = loader.config
        try loader.validateSections()
        let system = path == defaultConfigPath
        let spoolPath = config.spool.path ?? defaultSpoolPath(environment: environment, installedSystem: system)
        return Settings(
            config: config, configPath: path, spoolPath: spoolPath,
            statusPath: statusPath(spoolPath: spoolPath, environment: environment, installedSystem: system))
    }

    /// The paths an inspection command uses when the configuration is refused: `--spool` if given, else the
    /// installed service's spool when this box has one, else the usual default; built-in defaults for the rest.
    public static func withoutConfigFile(spoolPath: String?, environment: [String: String]) -> Settings {
        let installed =
            spoolPath == nil
            && FileManager.default.fileExists(atPath: (serviceSpoolPath as NSString).deletingLastPathComponent)
        let spool = spoolPath ?? defaultSpoolPath(environment: environment, installedSystem: installed)
        return Settings(
            config: BridgeConfig(), configPath: nil, spoolPath: spool,
            statusPath: statusPath(spoolPath: spool, environment: environment, installedSystem: installed))
    }

    /// `$RUNTIME_DIRECTORY/status.json` under systemd; the service's on an installed system when the spool is
    /// the service's; else beside the spool.
    public static func statusPath(spoolPath: String, environment: [String: String], installedSystem: Bool) -> String {
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first {
            return String(runtime) + "/status.json"
        }
        if installedSystem && spoolPath == serviceSpoolPath { return serviceStatusPath }
        return (spoolPath as NSString).deletingLastPathComponent + "/status.json"
    }

    /// The API sink's settings, or nil when no API is configured.
    public func apiSettings(token: String?) -> APISettings? {
        APISettings(SinkConfiguration(config: config, apiToken: token))
    }

    /// `$STATE_DIRECTORY/spool.sqlite` under systemd, else the service's spool on an installed system, else
    /// `$XDG_STATE_HOME/plings-bridge/spool.sqlite`, else `~/.local/state/plings-bridge/spool.sqlite`.
    public static func defaultSpoolPath(environment: [String: String], installedSystem: Bool = false) -> String {
        if let state = environment["STATE_DIRECTORY"], let first = state.split(separator: ":").first {
            return String(first) + "/spool.sqlite"
        }
        if installedSystem { return serviceSpoolPath }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return xdg + "/plings-bridge/spool.sqlite"
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/plings-bridge/spool.sqlite"
    }
}
