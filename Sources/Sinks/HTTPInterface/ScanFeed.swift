import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// The committed scans as a live feed for the interface's event streams. One thread follows the spool: woken after
/// every commit (this process's or another's), it reads what is new once and keeps the newest events in memory;
/// every stream sends from there, so fifty streams cost one spool read per commit, and a stream that is far behind
/// (a reconnection after a long gap) reads its own pages from the spool, a page at a time. After each change the
/// server's parked streams are woken (`onChange`).
///
/// While a stream wants the service's status (the bench page does), the thread also renders it after commits and
/// every few seconds, once for every stream; with no such stream it sleeps until the next commit.
final class ScanFeed: Sendable {
    /// One scan's event, framed (`id:` its sequence number, `data:` its `spool export` object).
    struct Event: Sendable {
        let seq: Int
        let text: String
    }

    struct State {
        /// The last sequence number read from the spool.
        var last = 0
        /// The newest events, oldest first, at most `recentLimit`: every scan after `coveredFrom`.
        var recent: [Event] = []
        var coveredFrom = 0
        var status: String?
        var statusVersion = 0
        var statusStreams = 0
        var streams = 0
        var stopping = false
    }

    /// What the streams wait on: the events and the status. Only the feed's thread changes it after a commit.
    let state = Monitor(State())
    /// What the feed's thread waits on, apart from the streams' monitor: a commit wakes one thread, not every
    /// stream, so the pipeline's commit thread is not made to share its core with fifty woken threads.
    private let wakeups = Monitor((woken: false, stopping: false))
    private let spool: Spool
    private let serviceStatus: @Sendable () -> JSONValue
    private let logger: Logger
    private let thread = Mutex<WorkerThread?>(nil)
    /// Told after new events, a new status or the stop: the server wakes its parked streams.
    private let changed = Mutex<(@Sendable () -> Void)?>(nil)

    static let recentLimit = 1024
    /// How often the status is rendered for status streams when nothing is committed (ages, a source's state).
    static let statusInterval = 5.0

    init(spool: Spool, status: @escaping @Sendable () -> JSONValue, logger: Logger) {
        self.spool = spool
        self.serviceStatus = status
        self.logger = logger
    }

    /// Starts following from the spool's current end: streams that ask for older scans read them from the spool.
    func start() {
        let last = (try? spool.lastSeq()) ?? 0
        state.withLock {
            $0.last = last
            $0.coveredFrom = last
        }
        let follower = WorkerThread(name: "http-feed", watched: true) { [self] in follow() }
        thread.withLock { $0 = follower }
    }

    /// Who is told after each change (the server, once it listens).
    func onChange(_ body: @escaping @Sendable () -> Void) { changed.withLock { $0 = body } }

    /// Ends every stream (their next read ends them) and the thread.
    func stop() {
        thread.withLock { $0 }?.expectEnd()
        state.update { $0.stopping = true }
        wakeups.update { $0.stopping = true }
        // Woken at once: it ends within its current read of the spool.
        thread.withLock { $0 }?.join(until: MonotonicClock.deadline(after: 5))
        let told = changed.withLock { body -> (@Sendable () -> Void)? in
            defer { body = nil }
            return body
        }
        told?()
    }

    private func tell() { changed.withLock { $0 }?() }

    /// Scans were committed: read them.
    func wake() { wakeups.update { $0.woken = true } }

    private func follow() {
        // When the status is due next; nil while no stream wants it (then only a commit wakes the thread).
        var statusDue: Double?
        var failing = false
        while true {
            wakeups.wait(until: statusDue) { $0.stopping || $0.woken }
            let stopping = wakeups.withLock { w in
                defer { w.woken = false }
                return w.stopping
            }
            if stopping { return }
            let statusWanted = state.withLock { $0.statusStreams > 0 }
            do {
                if try readNew() { tell() }
                if failing { logger.info("http: the spool is readable again") }
                failing = false
            } catch {
                if !failing {
                    logger.error("http: cannot read new scans from the spool", [("error", error.description)])
                }
                failing = true
            }
            guard statusWanted else {
                statusDue = nil
                continue
            }
            let now = MonotonicClock.now()
            if let due = statusDue, now < due {
                // A commit: the page's counts follow within a second, once a second during a burst.
                statusDue = min(due, now + 1)
            } else {
                publishStatus()
                statusDue = now + Self.statusInterval
            }
        }
    }

    /// Whether there was anything new.
    private func readNew() throws(SpoolError) -> Bool {
        var after = state.withLock { $0.last }
        var any = false
        while true {
            let items = try spool.scans(after: after, limit: 500)
            guard let last = items.last else { return any }
            any = true
            let events = items.map(Self.event)
            after = last.seq
            state.update { s in
                s.last = last.seq
                s.recent.append(contentsOf: events)
                if s.recent.count > Self.recentLimit {
                    let dropped = s.recent.count - Self.recentLimit
                    s.coveredFrom = s.recent[dropped - 1].seq
                    s.recent.removeFirst(dropped)
                }
            }
            if items.count < 500 { return any }
        }
    }

    private func publishStatus() {
        // Without its `updatedAt`, so an unchanged service is not sent again.
        let text = serviceStatus().removing(key: "updatedAt").encoded()
        let new = state.update { s -> Bool in
            guard s.status != text else { return false }
            s.status = text
            s.statusVersion += 1
            return true
        }
        if new { tell() }
    }

    static func event(_ item: SinkItem) -> Event {
        Event(seq: item.seq, text: ServerSentEvents.event(id: String(item.seq), data: item.record.json().encoded()))
    }

    /// The events after `seq` (at most `limit`): from memory when it holds every scan after `seq`, else from the
    /// spool (on the caller's thread).
    func events(after seq: Int, limit: Int) throws(SpoolError) -> [Event] {
        let cached: [Event]? = state.withLock { s in
            guard seq >= s.coveredFrom else { return nil }
            return Array(s.recent.drop { $0.seq <= seq }.prefix(limit))
        }
        if let cached { return cached }
        return try spool.scans(after: seq, limit: limit).map(Self.event)
    }

    /// A stream joins (`wantsStatus`: it is sent the status when it changes); the first status stream has the
    /// thread render the status at once.
    func join(wantsStatus: Bool) -> Int {
        let last = state.update { s in
            s.streams += 1
            if wantsStatus {
                if s.statusStreams == 0 { s.status = nil }
                s.statusStreams += 1
            }
            return s.last
        }
        if wantsStatus { wake() }
        return last
    }

    func leave(wantsStatus: Bool) {
        state.withLock { s in
            s.streams -= 1
            if wantsStatus { s.statusStreams -= 1 }
        }
    }
}
