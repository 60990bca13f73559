/// One `doctor` finding: what was checked, how it went, and what to do about it.
public struct DoctorCheck: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok, warn, fail, skip
    }

    public var name: String
    public var status: Status
    /// One line: what was found.
    public var message: String
    /// One line: what to do (empty when nothing is needed).
    public var fix: String

    public init(_ name: String, _ status: Status, _ message: String, fix: String = "") {
        self.name = name
        self.status = status
        self.message = message
        self.fix = fix
    }

    public func json() -> JSONValue {
        .object([
            ("name", .string(name)), ("status", .string(status.rawValue)), ("message", .string(message)),
            ("fix", .string(fix)),
        ])
    }

    /// `doctor` exits 0 when nothing failed (warnings and skips are not failures).
    public static func exitCode(_ checks: [DoctorCheck]) -> Int32 {
        checks.contains { $0.status == .fail } ? 1 : 0
    }
}
