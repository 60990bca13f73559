import BridgeCore
import PlingsAPI
import Foundation

/// Which configuration the running service uses and what its last reload did: `status` shows it,
/// `plings-bridge reload` (the unit's `ExecReload=`) waits for `generation` to move and reads the outcome, and
/// systemd's status line says it (`STATUS=`).
struct ConfigurationState: Sendable {
    /// 1 at start, one more for every reload, applied or refused.
    private(set) var generation = 1
    private(set) var path: String?
    /// When the configuration in force was loaded (start, or the last applied reload).
    private(set) var appliedAt = Date()
    private(set) var deliversToAPI: Bool
    /// The reason the latest reload was refused; nil when it was applied (or none happened).
    private(set) var refusal: String?
    private(set) var lastReloadAt: Date?

    init(_ settings: Settings) {
        path = settings.configPath
        deliversToAPI = settings.config.api.url != nil
    }

    mutating func applied(_ settings: Settings) {
        generation += 1
        path = settings.configPath
        deliversToAPI = settings.config.api.url != nil
        appliedAt = Date()
        lastReloadAt = appliedAt
        refusal = nil
    }

    mutating func refused(_ reason: String) {
        generation += 1
        lastReloadAt = Date()
        refusal = reason
    }

    /// systemd's one status line (`systemctl status`): what the service does, and a refused reload's reason until
    /// a reload is applied.
    var systemdStatus: String {
        let work = deliversToAPI ? "delivering to the API" : "spooling locally"
        guard let refusal else { return work }
        return "\(work); reload refused, running on the previous configuration: \(refusal)"
    }

    /// The status file's `config` member.
    var json: JSONValue {
        .object([
            ("path", path.map(JSONValue.string) ?? .null),
            ("generation", .integer(generation)),
            ("appliedAt", .string(Timestamp.format(appliedAt))),
            ("lastReload", lastReloadAt.map { _ in .string(refusal == nil ? "applied" : "refused") } ?? .null),
            ("lastReloadAt", lastReloadAt.map { .string(Timestamp.format($0)) } ?? .null),
            ("reloadError", refusal.map(JSONValue.string) ?? .null),
        ])
    }
}
