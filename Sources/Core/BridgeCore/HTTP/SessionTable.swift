/// The browsers signed in to the local interface (docs/contracts.md, "Access"): each session is an id the server
/// drew at random (the caller draws it from the kernel's CSPRNG), never the token or anything made from it, so a
/// cookie read off a shared bench PC reveals nothing of the token and stops working when it expires, when its
/// browser signs out, when the token changes or when the service restarts (the table lives only in memory).
///
/// Pure: the caller hands in the time (monotonic seconds, so a wall-clock step neither ends nor stretches a
/// session) and the random id. At most `capacity` sessions: a new one past that ends the oldest.
public struct SessionTable: Sendable {
    /// Sessions at once: a bench has a few browsers; a flood of sign-ins ends only the oldest.
    public static let capacity = 64
    /// Bytes of a session id: 256 bits (OWASP asks for at least 64 bits of entropy).
    public static let idBytes = 32

    private struct Session {
        var id: [UInt8]
        var expires: Double
    }

    /// Oldest first.
    private var sessions: [Session] = []
    /// Seconds a session lasts from its sign-in (`http.sessionLifetime`); a cookie's `Max-Age`.
    public var lifetime: Double

    public init(lifetime: Double) { self.lifetime = lifetime }

    public var count: Int { sessions.count }

    /// Starts a session for `id` at `now`; the expired ones go, and the oldest when the table is full.
    public mutating func begin(id: [UInt8], now: Double) {
        sessions.removeAll { $0.expires <= now }
        if sessions.count >= Self.capacity { sessions.removeFirst(sessions.count - Self.capacity + 1) }
        sessions.append(Session(id: id, expires: now + lifetime))
    }

    /// Whether `id` names a live session. Every session is compared in full, whatever matched, so the time taken
    /// says nothing of how much of an id was right.
    public func isLive(id: [UInt8], now: Double) -> Bool {
        var found = false
        for session in sessions {
            let same = HTTPAccessPolicy.constantTimeEqual(session.id, id)
            found = found || (same && session.expires > now)
        }
        return found
    }

    /// Signs out the session `id` (a no-op for an unknown one).
    public mutating func end(id: [UInt8]) {
        sessions.removeAll { HTTPAccessPolicy.constantTimeEqual($0.id, id) }
    }

    /// Signs everyone out (a new token).
    public mutating func endAll() { sessions.removeAll() }
}
