import BridgeCore
import Platform

/// One `GET /events` connection: every scan committed after the client's position, as server-sent events whose
/// `id:` is the scan's sequence number, so a reconnecting client (`Last-Event-ID`) gets exactly what it missed,
/// across a dropped connection or a restart of the bridge; with `status`, the service's status as `status` events
/// when it changes. Reads run on the server's one thread and never wait: with nothing new the stream is parked
/// until the feed changes (`ScanFeed` wakes the server's streams); a quiet stream gets a comment every
/// `keepalive` seconds, so a client can tell a quiet stream from a dead one.
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

    func read(max: Int, quiet: Bool) -> HTTPStreamRead {
        position.withLock { p in
            if p.sent == p.pending.count {
                switch next(after: p.after, statusVersion: p.statusVersion, quiet: quiet) {
                case .end: return .end
                case .nothing: return .later
                case .text(let text, let after, let statusVersion):
                    p.pending = Array(text.utf8)
                    p.sent = 0
                    p.after = after
                    p.statusVersion = statusVersion
                }
            }
            let end = min(p.pending.count, p.sent + max)
            defer { p.sent = end }
            return .bytes(Array(p.pending[p.sent..<end]))
        }
    }

    func close() { feed.leave(wantsStatus: wantsStatus) }

    private enum Next {
        case text(String, after: Int, statusVersion: Int)
        case nothing
        case end
    }

    /// What there is to send now: new scans, a changed status, or (when `quiet`) the keep-alive comment. The end
    /// when the service stops or the spool cannot be read.
    private func next(after: Int, statusVersion: Int, quiet: Bool) -> Next {
        let wantsStatus = self.wantsStatus
        let (stopping, last, status) = feed.state.withLock { s -> (Bool, Int, (String, Int)?) in
            var status: (String, Int)?
            if wantsStatus, s.statusVersion != statusVersion, let text = s.status { status = (text, s.statusVersion) }
            return (s.stopping, s.last, status)
        }
        if stopping { return .end }
        guard last > after || status != nil else {
            return quiet
                ? .text(ServerSentEvents.comment("keep-alive"), after: after, statusVersion: statusVersion)
                : .nothing
        }
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
            return .end
        }
        if text.isEmpty { text = ServerSentEvents.comment("keep-alive") }
        return .text(text, after: newAfter, statusVersion: status?.1 ?? statusVersion)
    }
}
