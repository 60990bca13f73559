import BridgeCore
import PlingsAPI

/// Where the API token comes from, never argv: `--api-token-file`/`api.tokenFile`, else
/// `PLINGS_BRIDGE_API_TOKEN`, else `$CREDENTIALS_DIRECTORY/token` (systemd `LoadCredential=`).
///
/// Every token is checked by `APIToken.validate` (visible ASCII, at least 16 characters) and every token file
/// is read through `BoundedFile` (at most 1 MiB, checked before reading).
public enum TokenSource {
    /// A problem that does not stop the bridge, and its fix.
    public struct Warning: Sendable, Equatable {
        public var message: String
        public var fix: String
    }

    /// What looking for the token found.
    public struct Lookup: Sendable, Equatable {
        public enum State: Sendable, Equatable {
            /// No token is configured, or the token file is empty ("no token yet": the installed service's
            /// `/etc/plings-bridge/token` starts empty). Only an error when `api.url` is set, and then
            /// `resolve` has already thrown.
            case absent
            /// A valid token.
            case found(String)
            /// The token file exists but this user may not read it (EACCES/EPERM). Typical for an operator's
            /// `plings-bridge scan` on an installed box, where the token belongs to the service user: not an
            /// error by itself, so the caller can choose (e.g. spool the read and leave delivery to the service).
            case unreadable(path: String)
        }

        public var state: State
        /// Problems that do not stop the bridge but deserve a log line and a `doctor` finding, such as a token
        /// file other users can read.
        public var warnings: [Warning] = []

        /// The token, when one was found.
        public var token: String? {
            if case .found(let token) = state { return token }
            return nil
        }
    }

    /// The token, or nil when none is configured. An API URL without a token, or with a token file this user
    /// cannot read, is a configuration error (see `resolve` for the unreadable case as a result).
    /// `warn` receives each of the lookup's warnings (the service logs them at start and on reload).
    public static func load(
        config: BridgeConfig, environment: [String: String], warn: (Warning) -> Void = { _ in }
    ) throws(ConfigError) -> String? {
        let lookup = try resolve(config: config, environment: environment)
        lookup.warnings.forEach(warn)
        switch lookup.state {
        case .found(let token): return token
        case .unreadable(let path) where config.api.url != nil:
            throw ConfigError("cannot read the token file \(path): permission denied")
        case .absent, .unreadable: return nil
        }
    }

    /// Looks for the token without deciding what an unreadable token file means. Throws for a token that is
    /// invalid, a token file that is missing, too large or not a file, and for `api.url` set with no token.
    public static func resolve(config: BridgeConfig, environment: [String: String]) throws(ConfigError) -> Lookup {
        var lookup = Lookup(state: .absent)
        if let file = config.api.tokenFile {
            lookup = try read(file, what: "api.tokenFile", required: true)
            if config.api.url != nil, lookup.state == .absent {
                throw ConfigError("api.url is set but the token file \(file) (api.tokenFile) is empty")
            }
        } else if let token = environment["PLINGS_BRIDGE_API_TOKEN"] {
            lookup.state = .found(try APIToken.validate(token, source: "environment variable PLINGS_BRIDGE_API_TOKEN"))
        } else if let directory = environment["CREDENTIALS_DIRECTORY"] {
            // The unit always loads the credential; an empty one means "no API token yet".
            lookup = try read(directory + "/token", what: "systemd credential 'token'", required: false)
        }
        if config.api.url != nil, lookup.state == .absent {
            throw ConfigError(
                "api.url is set but there is no token: set api.tokenFile (--api-token-file), "
                    + "PLINGS_BRIDGE_API_TOKEN, or a systemd credential named 'token'")
        }
        return lookup
    }

    private static func read(_ path: String, what: String, required: Bool) throws(ConfigError) -> Lookup {
        switch try BoundedFile.read(path, what: "\(what): token file") {
        case .missing:
            if required { throw ConfigError("\(what): no token file at \(path)") }
            return Lookup(state: .absent)
        case .denied:
            return Lookup(state: .unreadable(path: path))
        case .read(let bytes, let mode):
            let text = String(decoding: bytes, as: UTF8.self)
            if text.trimmingASCIIWhitespace().isEmpty { return Lookup(state: .absent) }
            var lookup = Lookup(state: .found(try APIToken.validate(text, source: "\(what): token file \(path)")))
            if mode & 0o044 != 0 {
                lookup.warnings.append(
                    Warning(
                        message: "token file \(path) can be read by "
                            + (mode & 0o004 != 0 ? "every user" : "its group") + " (mode \(String(mode, radix: 8)))",
                        fix: "chmod 600 \(path) (owned by the user the bridge runs as)"))
            }
            return lookup
        }
    }
}
