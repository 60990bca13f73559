import BridgeCore
import Platform

/// The interface's sessions (`SessionTable`) behind a lock, with ids drawn from the kernel's CSPRNG (`KernelRandom`). Owned by the
/// sink, not by one server, so a restart of the listener for other settings keeps everyone signed in; a new token
/// (or none) signs everyone out (`HTTPInterfaceSink.apply`).
final class HTTPSessions: Sendable {
    private let table: Mutex<SessionTable>

    init(lifetime: Double) { table = Mutex(SessionTable(lifetime: lifetime)) }

    var lifetime: Double {
        get { table.withLock { $0.lifetime } }
        set { table.withLock { $0.lifetime = newValue } }
    }

    var count: Int { table.withLock { $0.count } }

    /// A new session's id, or nil when the kernel gives no random bytes (the sign-in then fails, saying so).
    func begin() -> [UInt8]? {
        guard let id = KernelRandom.bytes(SessionTable.idBytes) else { return nil }
        table.withLock { $0.begin(id: id, now: MonotonicClock.now()) }
        return id
    }

    /// Whether the cookie's value names a live session.
    func isLive(cookie: String?) -> Bool {
        guard let cookie, let id = HTTPAccessPolicy.fromHex(cookie) else { return false }
        return table.withLock { $0.isLive(id: id, now: MonotonicClock.now()) }
    }

    func end(cookie: String?) {
        guard let cookie, let id = HTTPAccessPolicy.fromHex(cookie) else { return }
        table.withLock { $0.end(id: id) }
    }

    func endAll() { table.withLock { $0.endAll() } }
}
