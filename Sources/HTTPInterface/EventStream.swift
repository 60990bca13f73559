import BridgeCore
import Platform

/// One `GET /events` connection: every scan committed after the client's position, as server-sent events whose
/// `id:` is the scan's sequence number, so a reconnecting client (`Last-Event-ID`) gets exactly what it missed,
/// across a dropped connection or a restart of the bridge; with `status`, the service's status as `status` events
/// when it changes. Reads run on the connection's own thread and block on the feed until there is something to
/// send; a quiet stream gets a comment every `keepalive` seconds, which is how a vanished client is noticed.
final class EventStream: HTTPStream {
    private struct Position {
        var after: Int
        var statusVersion = 0
        var pending: [UInt8]
        var sent = 0
    }

    private let feed: ScanFeed
    private let wantsStatus: Bool
    private let onError: @Sendable (String) -> Void
    private let position: Mutex<Position>

    static let keepalive = 30.0
    /// Events per write when catching up from the spool.
    static let page = 500

    /// `after`: the client's last sequence number (nil: from now on).
    init(feed: ScanFeed, after: Int?, wantsStatus: Bool, onError: @escaping @Sendable (String) -> Void) {
        self.feed = feed
        self.wantsStatus = wantsStatus
        self.onError = onError
        let last = feed.join(wantsStatus: wantsStatus)
        // A position beyond the spool's end (a client of an earlier spool) starts from now: no scan twice.
        let start = min(after ?? last, last)
        // The first bytes open the client's stream at once; `retry` sets its reconnection delay.
        position = Mutex(Position(after: start, pending: Array(ServerSentEvents.retry(milliseconds: 1000).utf8)))
    }

    func read(max: Int) -> [UInt8]? {
        position.withLock { p in
            if p.sent == p.pending.count {
                guard let next = next(after: p.after, statusVersion: p.statusVersion) else { return nil }
                p.pending = Array(next.text.utf8)
                p.sent = 0
                p.after = next.after
                p.statusVersion = next.statusVersion
            }
            let end = min(p.pending.count, p.sent + max)
            defer { p.sent = end }
            return Array(p.pending[p.sent..<end])
        }
    }

    func close() { feed.leave(wantsStatus: wantsStatus) }

    /// Blocks until there is something to send: new scans, a changed status, or the keep-alive's turn. Nil when
    /// the stream ends (the service stops, the spool cannot be read).
    private func next(after: Int, statusVersion: Int) -> (text: String, after: Int, statusVersion: Int)? {
        let wantsStatus = self.wantsStatus
        var status: (String, Int)?
        var stopping = false
        var last = after
        let ready = feed.state.wait(until: MonotonicClock.deadline(after: Self.keepalive)) { s in
            stopping = s.stopping
            last = s.last
            if wantsStatus, s.statusVersion != statusVersion, let text = s.status { status = (text, s.statusVersion) }
            return s.stopping || s.last > after || status != nil
        }
        if stopping { return nil }
        guard ready else { return (ServerSentEvents.comment("keep-alive"), after, statusVersion) }
        var text = ""
        var newAfter = after
        if let (statusText, _) = status { text += ServerSentEvents.event(event: "status", data: statusText) }
        do {
            let events = try feed.events(after: after, limit: Self.page)
            for event in events { text += event.text }
            // None left after `after` (purged meanwhile): the position moves to the end all the same.
            newAfter = events.last?.seq ?? last
        } catch {
            onError(error.description)
            return nil
        }
        if text.isEmpty { text = ServerSentEvents.comment("keep-alive") }
        return (text, newAfter, status?.1 ?? statusVersion)
    }
}
