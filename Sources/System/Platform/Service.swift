import Foundation

/// The one lifecycle contract of every long-running part of the bridge (the shape of swift-service-lifecycle's
/// `Service`): nothing runs until `start`, and `stop` finishes or abandons the part's work by a shared
/// monotonic deadline. No part starts a thread in its initializer.
public protocol Service: AnyObject, Sendable {
    /// A short name for logs ("pipeline", "api"...).
    var name: String { get }
    /// Starts the part's threads. Called once.
    func start()
    /// Stops the part and returns by `deadline` (seconds of `MonotonicClock`), whatever is left undone.
    func stop(deadline: Double)
}

/// Starts services in order and stops them in reverse order against one overall deadline, as
/// swift-service-lifecycle's `ServiceGroup` does. Services come in layers: a layer starts after the one before it
/// and stops before it; the services of one layer are independent of each other, so they stop together (each on a
/// thread of its own) and a slow one does not eat the others' time. Every stop gets whatever time is left.
public final class ServiceGroup: Sendable {
    private let layers: [[any Service]]

    /// One service per layer: each stops after the ones started after it.
    public convenience init(_ services: [any Service]) { self.init(layers: services.map { [$0] }) }

    /// `layers`, first to last; within a layer, services that neither feed nor wait for each other.
    public init(layers: [[any Service]]) { self.layers = layers.filter { !$0.isEmpty } }

    /// Starts every service, first to last. Blocking: call it from the main thread or a thread of its own.
    public func start() {
        for layer in layers {
            for service in layer { service.start() }
        }
    }

    /// Stops every layer, last to first, all by `deadline`. Returns the names of the services still running when
    /// the deadline passed (empty when all stopped in time).
    @discardableResult
    public func stop(deadline: Double) -> [String] {
        let late = Mutex<[String]>([])
        for layer in layers.reversed() {
            OwnThread.together(
                name: "stop",
                layer.map { service in
                    {
                        service.stop(deadline: deadline)
                        if MonotonicClock.now() > deadline { late.withLock { $0.append(service.name) } }
                    }
                })
        }
        return late.withLock { $0 }
    }
}

/// A thread that runs `body` at once and then every `interval` seconds until stopped. Periodic work that
/// touches disks or waits (the spool's retention purge, the status file, the watchdog) runs here, never on
/// Swift's cooperative pool; its waits are on the monotonic clock, so a wall-clock step changes nothing.
public final class PeriodicThread: Service {
    public let name: String
    private let interval: Double
    private let body: @Sendable () -> Void
    private struct State {
        var stopping = false
        var woken = false
        /// When the last round ended, and when the next must start at the latest (`wake(within:)`).
        var lastEnd = -Double.infinity
        var due = Double.infinity
    }
    private let state = Monitor(State())
    private let worker = Mutex<WorkerThread?>(nil)
    private let watched: Bool
    private let interrupt: @Sendable () -> Void

    /// `watched`: the watchdog tells when a round hangs (`WorkerThread.init`). `interrupt`: called at the stop, to
    /// end a long round (a whole-file check) rather than wait for it.
    public init(
        name: String, interval: Double, watched: Bool = false, interrupt: @escaping @Sendable () -> Void = {},
        body: @escaping @Sendable () -> Void
    ) {
        self.name = name
        self.interval = interval
        self.watched = watched
        self.interrupt = interrupt
        self.body = body
    }

    public func start() {
        let started = WorkerThread(name: name, watched: watched) { [self] in
            while true {
                body()
                var stopping = false
                let until = state.update { s -> Double in
                    s.lastEnd = MonotonicClock.now()
                    return min(s.lastEnd + interval, s.due)
                }
                state.wait(until: until) { state in
                    stopping = state.stopping
                    return state.stopping || state.woken || state.due < until
                }
                if stopping { break }
                // Whatever woke it (the period, a wake, a due round), this round serves them all.
                let wait = state.update { s -> Double in
                    s.woken = false
                    defer { s.due = .infinity }
                    return s.due < until ? s.due - MonotonicClock.now() : 0
                }
                // An earlier `due` arrived during the wait: wait for it (or a stop), then run.
                if wait > 0 {
                    state.wait(until: MonotonicClock.deadline(after: wait)) { $0.stopping || $0.woken }
                    if state.withLock({ $0.stopping }) { break }
                    state.update { $0.woken = false }
                }
            }
        }
        worker.withLock { $0 = started }
    }

    public func stop(deadline: Double) {
        worker.withLock { $0 }?.expectEnd()
        state.update { $0.stopping = true }
        interrupt()
        worker.withLock { $0 }?.join(until: deadline)
    }

    /// Runs `body` once more as soon as the current round (if any) ends, then the period starts again. Wakes that
    /// arrive during one round fold into one more round, so a burst costs at most one extra run.
    public func wake() {
        state.update { $0.woken = true }
    }

    /// Runs `body` once more within `gap` seconds of the last round's end: at once if that was longer ago. Many such
    /// wakes in a burst (every delivery of a drain) cost one round per `gap`.
    public func wake(within gap: Double) {
        state.update { s in
            let at = s.lastEnd + gap
            if at <= MonotonicClock.now() { s.woken = true } else { s.due = min(s.due, at) }
        }
    }
}
