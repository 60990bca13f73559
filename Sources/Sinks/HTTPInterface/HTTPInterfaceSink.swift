import BridgeCore
import Foundation
import Logging
import Platform
import SinkKit
import Spool

/// The local HTTP interface as a sink: it shows committed scans (the bench page, `/events`, `/scans`) and the
/// service (`/status`, `/metrics`, `/healthz`, `/readyz`) and delivers nothing, so it keeps no queue in the spool;
/// it reads scans by sequence number on a read-only connection of its own, and a commit only wakes its feed.
///
/// A listener that cannot bind (another program has the port) is retried with growing waits (2 s to 60 s) and
/// shows as `failing` in `status`; a reload with other `http` settings restarts the server.
final class HTTPInterfaceSink: ScanSink {
    let name = "http"

    private struct Running {
        var server: HTTPServer
        var feed: ScanFeed
        var settings: HTTPSettings
    }

    private struct State {
        var wanted: HTTPSettings?
        var running: Running?
        /// Listening, or failing to (why, and when the next attempt goes): the model every sink shares.
        var health = HTTPInterfaceSink.freshHealth
        var stopping = false
        var requests = 0
    }

    private let context: SinkContext
    private let state = Monitor(State())
    private let retryThread = Mutex<WorkerThread?>(nil)
    /// A read-only connection of its own, so showing scans never waits for a commit's lock or holds it.
    private let reader = Mutex<Spool?>(nil)
    /// Signed-in browsers: they outlive a restart of the listener, not a new token.
    private let sessions = HTTPSessions(lifetime: HTTPConfig().sessionLifetime)

    init(context: SinkContext) { self.context = context }

    /// Listening is retried after 2 s, doubling to 60 s, without jitter (one listener, nobody to spread out).
    static var freshHealth: SinkHealth { SinkHealth(backoff: Backoff(base: 2, cap: 60), pauseDuration: 0) }

    func start() {
        apply(context.configuration)
        let thread = WorkerThread(name: "http-retry", watched: true) { [self] in retryLoop() }
        retryThread.withLock { $0 = thread }
    }

    func stop(deadline: Double) {
        retryThread.withLock { $0 }?.expectEnd()
        let running = state.update { s -> Running? in
            s.stopping = true
            defer { s.running = nil }
            return s.running
        }
        if let running { shut(running) }
        retryThread.withLock { $0 }?.join(until: deadline)
    }

    func wake() { state.withLock { $0.running?.feed }?.wake() }

    /// Starts, restarts or stops the server for the `http` section now in force.
    func apply(_ configuration: SinkConfiguration) {
        let settings: HTTPSettings?
        do {
            settings = try configuration.config.http.settings()
        } catch {
            context.logger.error("http: the interface keeps its settings: \(error.description)")
            return
        }
        let old = state.update { s -> Running? in
            guard !s.stopping, s.wanted != settings || s.running == nil else { return nil }
            if s.wanted?.token != settings?.token { sessions.endAll() }
            if let settings { sessions.lifetime = settings.sessionLifetime }
            s.wanted = settings
            s.health = HTTPInterfaceSink.freshHealth
            defer { s.running = nil }
            return s.running
        }
        if let old {
            shut(old)
            context.logger.info("http: stopped listening", [("address", old.settings.address.description)])
        }
        tryStart()
    }

    /// One attempt to listen as `wanted` says; a failure is logged once and retried by `retryLoop`.
    private func tryStart() {
        guard let settings = state.withLock({ s in s.running == nil && !s.stopping ? s.wanted : nil }) else {
            state.update { s in
                if s.wanted == nil { s.health = HTTPInterfaceSink.freshHealth }
            }
            return
        }
        do {
            let running = try start(settings)
            let keep = state.update { s -> Bool in
                guard !s.stopping, s.wanted == settings, s.running == nil else { return false }
                s.running = running
                _ = s.health.succeeded(clock: MonotonicClock.now())
                return true
            }
            guard keep else {
                shut(running)
                return
            }
            context.logger.info(
                "the local interface is up",
                [("address", settings.url)]
                    + (settings.token == nil ? [] : [("access", "token")]))
            context.stateChanged()
        } catch {
            let (first, wait) = state.update { s -> (Bool, Double) in
                let (wait, change) = s.health.failed(
                    reason: "cannot listen on \(settings.address): \(error.description)", now: Date(),
                    clock: MonotonicClock.now(), random: 1)
                return (change != nil, wait)
            }
            if first {
                context.logger.error(
                    "http: cannot listen; retrying",
                    [
                        ("address", settings.address.description), ("error", error.description),
                        ("retryIn", String(format: "%.0fs", wait)),
                    ])
                context.stateChanged()
            }
        }
    }

    private func start(_ settings: HTTPSettings) throws(HTTPServerError) -> Running {
        let spool = reader.withLock { spool -> Spool? in
            if spool == nil { spool = try? Spool.openIfExists(path: context.spool.path) }
            return spool
        }
        let feed = ScanFeed(spool: spool ?? context.spool, status: context.board.status, logger: context.logger)
        let routes = HTTPRoutes(
            feed: feed, spool: spool ?? context.spool,
            policy: HTTPAccessPolicy(token: settings.token, tls: settings.tls), sessions: sessions,
            status: context.serviceStatus,
            metrics: context.serviceMetrics, logger: context.logger,
            counted: { [weak self] in self?.state.withLock { $0.requests += 1 } })
        feed.start()
        do {
            let server = try HTTPServer(
                address: settings.address.host, port: settings.address.port, maxClients: settings.maxClients,
                keepalive: EventStream.keepalive, certificate: settings.certificate, key: settings.key,
                handler: routes.handle)
            feed.onChange { server.wakeStreams() }
            return Running(server: server, feed: feed, settings: settings)
        } catch {
            feed.stop()
            throw error
        }
    }

    /// Ends the streams first (the feed's stop wakes them to their end), then closes the server and its threads.
    private func shut(_ running: Running) {
        running.feed.stop()
        running.server.stop()
    }

    private func retryLoop() {
        while true {
            state.wait(until: state.withLock { $0.health.notBefore }) { s in
                s.stopping || (s.health.notBefore.map { MonotonicClock.now() >= $0 } ?? false)
            }
            if state.withLock({ $0.stopping }) { return }
            tryStart()
        }
    }

    /// `http`: off, listening (address, streams open) or failing (why).
    var statusEntry: JSONValue {
        let s = state.withLock { $0 }
        guard let wanted = s.wanted else { return .null }
        let url = wanted.url
        if let running = s.running {
            return .object([
                ("state", .string("listening")), ("url", .string(url)),
                ("streams", .integer(running.feed.state.withLock { $0.streams })), ("reason", .null),
            ])
        }
        return .object([
            ("state", .string("failing")), ("url", .string(url)), ("streams", .integer(0)),
            ("reason", s.health.reason.map(JSONValue.string) ?? .null),
        ])
    }

    func addMetrics(to m: inout MetricsText) {
        let s = state.withLock { $0 }
        guard s.wanted != nil else { return }
        m.add("plings_bridge_http_up", s.running == nil ? 0 : 1, help: "1 while the local interface listens")
        m.add(
            "plings_bridge_http_streams", Double(s.running?.feed.state.withLock { $0.streams } ?? 0),
            help: "Open /events streams (a bench page holds one)")
        m.add(
            "plings_bridge_http_requests_total", Double(s.requests), help: "Requests the local interface answered",
            type: "counter")
        guard let counts = s.running?.server.counts else { return }
        for (state, count) in [
            ("waiting", counts.waiting), ("answering", counts.answering), ("streaming", counts.streaming),
        ] {
            m.add(
                "plings_bridge_http_connections", Double(count), labels: [("state", state)],
                help: "Open connections to the local interface: waiting for a request, being answered, streaming")
        }
        for (reason, count) in [
            ("incomplete", counts.closed_incomplete), ("stalled", counts.closed_stalled),
            ("limit", counts.closed_at_limit), ("left", counts.streams_left),
            ("malformed", counts.refused_malformed),
        ] {
            m.add(
                "plings_bridge_http_closed_total", Double(count), labels: [("reason", reason)],
                help: "Connections closed by the interface: no whole request within 10 s (incomplete), a stream not "
                    + "read for 60 s (stalled), the oldest waiting one at http.maxClients (limit), a malformed "
                    + "request head refused (malformed); streams whose client hung up (left)", type: "counter")
        }
    }
}
