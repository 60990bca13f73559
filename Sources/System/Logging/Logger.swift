import BridgeCore
import Glibc
import Platform

/// Severity of a log event.
public enum LogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case debug, info, warn, error

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
    public var description: String {
        switch self {
        case .debug: return "debug"
        case .info: return "info"
        case .warn: return "warn"
        case .error: return "error"
        }
    }
}

/// Writes logfmt lines (`level=... msg=... key=value`) to stderr, one `write(2)` per line so lines from
/// several threads never interleave. Registered secrets (the API token) are redacted from every line.
public final class Logger: Sendable {
    private struct State {
        var minimum: LogLevel
        var secrets: [String] = []
    }
    private let state: Mutex<State>
    private let fd: Int32

    public init(minimum: LogLevel = .info, fd: Int32 = 2) {
        state = Mutex(State(minimum: minimum))
        self.fd = fd
    }

    /// Process-wide logger; the level comes from `PLINGS_BRIDGE_LOG_LEVEL`-free defaults, set by the CLI.
    public static let shared = Logger()

    public var minimum: LogLevel {
        get { state.withLock { $0.minimum } }
        set { state.withLock { $0.minimum = newValue } }
    }

    /// Never print `secret`, whatever message or field carries it.
    public func addSecret(_ secret: String) {
        state.withLock { $0.secrets.append(secret) }
    }

    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        let secrets: [String]? = state.withLock { s in level >= s.minimum ? s.secrets : nil }
        guard let secrets else { return }
        // Redact before quoting: quoting escapes `"` and `\` in a secret, and the escaped spelling would not
        // match. The formatted line is checked again for any spelling that quoting produced.
        let clean = fields.map { ($0.0, LogLine.redact($0.1, secrets: secrets)) }
        var line = LogLine.format(
            level: level.description, message: LogLine.redact(message, secrets: secrets), fields: clean)
        line = LogLine.redact(line, secrets: secrets) + "\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, base + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    public func debug(_ message: String, _ fields: [(String, String)] = []) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, String)] = []) { log(.info, message, fields) }
    public func warn(_ message: String, _ fields: [(String, String)] = []) { log(.warn, message, fields) }
    public func error(_ message: String, _ fields: [(String, String)] = []) { log(.error, message, fields) }
}
