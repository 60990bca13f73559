import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What the answer to one request meant for the scans it carried.
public enum QueuedAnswer: Sendable, Equatable {
    /// One outcome for every scan (no answer, a 5xx, a refused token): a retry keeps the request's scans and key.
    case whole(DeliveryOutcome)
    /// One outcome per scan, in request order; nil for a scan that was not sent after all (shutdown).
    case each([DeliveryOutcome?])
    /// The other side cannot take several scans in one request: they go one per request until a reload.
    case refused(reason: String)
}

/// A queue sink's transport: what it needs per worker, and how many scans a request may carry now.
public protocol QueuedSinkTransport: Sendable {
    /// Scans one request may carry now (1: each alone); asked before every claim, so a reload applies at once.
    var batchSize: Int { get }
    /// Scans the first request may carry when none is in flight (a start, a reconnect, a backlog after idling):
    /// smaller for a transport whose requests are large, so the first message goes out before a whole request is
    /// read. `batchSize` unless said otherwise.
    var openingBatchSize: Int { get }
    /// How long a claimed scan is reserved: the request's timeout plus a margin. If the process dies, another
    /// one sends the scan again after this long. (Not used in capture order: nothing is leased there.)
    var lease: Double { get }
    /// The kind's rule of order (`perIdentifier` unless said otherwise).
    var order: QueuedSinkOrder { get }
    /// A connection for one worker (its own keep-alive client); nil when none can be made (logged by the maker).
    func connect() -> (any QueuedSinkConnection)?
    /// Starts what the transport keeps beside the workers (a broker session with its own network thread), before
    /// the first claim. `link` is how it tells the runner that its connection came or went: while it is down
    /// nothing is claimed, and when it is back the backlog is due at once.
    func start(_ link: QueuedSinkLink)
    /// Ends it after the workers have stopped, by the monotonic `deadline`.
    func stop(deadline: Double)
    /// The service's state changed (a commit, a source, a sink): a transport that publishes it looks again.
    func wake()
    /// A reload reached the sink: a transport waiting to connect again tries now.
    func resume()
}

extension QueuedSinkTransport {
    public var openingBatchSize: Int { batchSize }
    public var order: QueuedSinkOrder { .perIdentifier }
    public func start(_ link: QueuedSinkLink) {}
    public func stop(deadline: Double) {}
    public func wake() {}
    public func resume() {}
}

/// A kind's rule of order, which its claims follow.
public enum QueuedSinkOrder: Sendable {
    /// A later scan of an identifier never overtakes an earlier one; other identifiers go on (the API, a webhook:
    /// docs/contracts.md, "Delivery order"). Claims are leased, batches kept for a retry under the same key.
    case perIdentifier
    /// Every scan in the order it was read, whatever its identifier (MQTT: a subscriber sees the reads in their
    /// order): a claim never skips a pending scan, so one waiting out its backoff holds those behind it. The
    /// requests of several workers are handed to the transport in claim order (`QueuedSinkConnection.handOver`).
    case capture
}

/// How a transport with a connection of its own (MQTT's broker session) tells its runner what became of it, and
/// learns how long to wait before connecting again. Health is the runner's (one `SinkHealth` per sink, with the
/// kind's backoff); the transport says what happened and logs its own words when a call says health changed.
/// Every change is also kept as the sink's problem in the spool (`spool stats` in another process).
public final class QueuedSinkLink: Sendable {
    private struct Target: Sendable { weak var runner: QueuedSinkRunner? }
    private let target = Mutex(Target())

    public init() {}

    func bind(_ runner: QueuedSinkRunner) { target.withLock { $0.runner = runner } }
    private var runner: QueuedSinkRunner? { target.withLock { $0.runner } }

    /// Connected: healthy, and what waits out a backoff is due now. True when health changed (it was starting,
    /// failing or paused).
    @discardableResult
    public func connected() -> Bool { runner?.transportConnected() ?? false }
    /// The connection failed or was lost: failing (the status follows the latest reason unless `replacing` is
    /// false: a bare result code says less than the reason already known), nothing claimed until it is back. True
    /// when health started failing. A failure during a pause changes nothing.
    @discardableResult
    public func failed(reason: String, replacing: Bool = true) -> Bool {
        runner?.transportFailed(reason: reason, replacing: replacing) ?? false
    }
    /// Refused for a reason only a person can fix (a login): paused until a reload or the pause's end. True when
    /// it was not paused yet.
    @discardableResult
    public func paused(reason: String) -> Bool { runner?.transportPaused(reason: reason) ?? false }
    /// The wait before the next connection attempt (monotonic seconds from now): the pause's rest while paused,
    /// else the backoff for the failures so far, which it counts (at least 3/4 of the backoff's ceiling).
    /// `forgiving`: the connection that ended had lasted; the backoff starts again from its first step.
    public func retryDelay(forgiving: Bool = false) -> Double {
        runner?.transportRetryDelay(forgiving: forgiving) ?? 1
    }
    /// True while a pause (not yet over) is in force.
    public var isPaused: Bool { runner?.transportIsPaused ?? false }
}

/// One worker's connection. Only its worker calls `deliver`; `cancel` may come from any thread.
public protocol QueuedSinkConnection: Sendable {
    /// Hands `batch` over before it is delivered: called by the worker that took the request, one request at a
    /// time and in the order they were claimed, whatever the workers' timing (capture order's transports queue the
    /// messages here; nothing else needs it). Must not block.
    func handOver(_ batch: DeliveryBatch)
    /// Sends `batch` (one or more scans, in capture order, under `batch.key`); blocks until an answer or the
    /// transport's timeout. nil: cancelled before an answer (shutdown), nothing is counted.
    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer?
    /// The runner is stopping: nothing more is to be started, and what is already on its way may still be
    /// answered (a broker's PUBACKs); the request in progress then ends with what was answered. Unlike `cancel`,
    /// nothing sent is abandoned. Nothing to do for a transport whose requests are one exchange each.
    func finish()
    /// Abandons the request in progress and every later one (shutdown).
    func cancel()
}

extension QueuedSinkConnection {
    public func handOver(_ batch: DeliveryBatch) {}
    public func finish() {}
}

/// What a sink says when its health changes or a scan is refused: every line of the runner's own is the sink's.
public struct QueuedSinkVoice: Sendable {
    public typealias Line = (message: String, fields: [(String, String)])
    /// Delivery started failing (the reason is the first failure's).
    public var failing: @Sendable (_ reason: String) -> Line
    /// Delivery works again: how long it was down, how many attempts failed, whether it had been paused.
    public var resumed: @Sendable (_ downFor: Double, _ failedAttempts: Int, _ afterPause: Bool) -> Line
    /// Delivery paused: a refused credential or a redirect only a person can fix (the outcome says which).
    public var paused: @Sendable (_ outcome: DeliveryOutcome) -> Line
    /// One scan refused for good (a warning).
    public var refusedScan: @Sendable (_ id: String, _ reason: String) -> Line
    /// Requests of several scans refused as such: one scan per request from now until a reload (a warning).
    public var refusedBatches: @Sendable (_ reason: String) -> Line
    /// The debug line for each scan delivered (its `id` follows).
    public var deliveredScan: String
    /// The subject of the runner's other lines ("api: delivery", "webhook: delivery").
    public var prefix: String
    /// Said when a reload ends a backoff (the next attempt goes now).
    public var reloaded: String

    public init(
        prefix: String, deliveredScan: String, failing: @escaping @Sendable (String) -> Line,
        resumed: @escaping @Sendable (Double, Int, Bool) -> Line, paused: @escaping @Sendable (DeliveryOutcome) -> Line,
        refusedScan: @escaping @Sendable (String, String) -> Line, refusedBatches: @escaping @Sendable (String) -> Line
    ) {
        self.prefix = prefix
        self.deliveredScan = deliveredScan
        self.failing = failing
        self.resumed = resumed
        self.paused = paused
        self.refusedScan = refusedScan
        self.refusedBatches = refusedBatches
        reloaded = "\(prefix): configuration reloaded; trying again now"
    }

    /// One line per delivered (debug) or dead (warning) scan; failures and pauses are told once per change of
    /// health instead (the runner's workers and the `scan` command's one attempt say the same).
    public func tell(_ outcome: DeliveryOutcome?, id: String, logger: Logger) {
        switch outcome {
        case .delivered?: logger.debug(deliveredScan, [("id", id)])
        case .dead(let reason, _)?:
            let line = refusedScan(id, reason)
            logger.warn(line.message, line.fields)
        default: break
        }
    }

    /// The lines of a sink known by `name` ("webhook: delivery failing; ...").
    public static func named(_ name: String) -> QueuedSinkVoice {
        QueuedSinkVoice(
            prefix: "\(name): delivery", deliveredScan: "\(name): scan delivered",
            failing: { ("\(name): delivery failing; scans stay queued and are retried", [("reason", $0)]) },
            resumed: { downFor, failed, afterPause in
                (
                    afterPause ? "\(name): delivery resumed after the pause" : "\(name): delivery resumed",
                    [("downSeconds", String(format: "%.1f", downFor)), ("failedAttempts", String(failed))]
                )
            },
            paused: {
                (
                    "\(name): delivery paused until a reload or for \(Int(QueuedSinkRunner.pauseDuration / 60)) min",
                    [("reason", $0.reason ?? "")]
                )
            },
            refusedScan: {
                ("\(name): scan refused for good; kept in the spool as refused", [("scan", $0), ("reason", $1)])
            },
            refusedBatches: {
                (
                    "\(name): a request of several scans was refused as such; one scan per request until a reload",
                    [("reason", $0)]
                )
            })
    }
}

/// Runs a sink that delivers from its own queue in the spool (the API, a webhook): claims the scans that may go
/// now from the sink's `DeliveryLedger` (in capture order per identifier, each with its own backoff, leased),
/// hands them in requests to `workers` threads, each with its own connection, records what each answer left on
/// each scan, and keeps the sink's health (`SinkHealth`: backoff with jitter after a failure, one probe at a time
/// while failing, a pause after a refusal only a person can fix). A sink is its settings, its transport and its
/// voice; everything else is here.
///
/// One coordinator thread claims and the workers send; all of them block (a condition variable, the transport)
/// and none runs on the Swift cooperative pool. When idle the coordinator sleeps until a scan is committed or
/// another process changes the spool (`wake`) or the earliest backoff or lease ends; nothing else wakes it.
///
/// Every wait is on the monotonic clock. The spool's times (`next_attempt_at`, leases) are wall-clock times,
/// because they outlive the process; a wall clock stepped back makes them lie far ahead, so the spool treats a
/// time further ahead than `Spool.longestWait` as due now (a step forward just makes waits end early).
public final class QueuedSinkRunner: Service {
    /// Counters in scans, since start.
    public typealias Stats = DeliveryStats

    private struct State {
        var stopping = false
        /// Connections lost so far (`transportFailed`, `transportPaused`): a claim made before one is stale.
        var outages = 0
        var wakeRequested = true
        /// Requests claimed and not yet taken by a worker.
        var jobs: [Job] = []
        var inFlight: [String: String] = [:]  // scan id -> identifier
        /// Requests claimed and not yet answered (queued or being sent).
        var requests = 0
        /// The other side refused a request of several scans as such: one scan per request until a reload.
        var batchesRefused = false
        /// The size of the last request claimed, from which the next one grows (`requestSize`).
        var lastRequestSize = 0
        /// Scans of a request refused for good as a whole: each goes alone, so only the one refused alone is dead.
        /// Requests carry one scan while any is left (or until nothing is due).
        var singly: Set<String> = []
        var health: SinkHealth
        var workersRunning = 0
        var coordinatorRunning = false
        var connections: [any QueuedSinkConnection] = []
        var stats = Stats()
        /// Consecutive failures to use the spool (disk full, I/O error), for backoff and one log line.
        var spoolFailures = 0
        /// A reload ended a backoff: the scans waiting out theirs are made due before the next claim.
        var backlogDueRequested = false
        /// The transport says it has no connection (`QueuedSinkLink`): nothing is claimed until it is back.
        var connectionDown = false
        /// Requests taken by workers, and those of them handed to the transport: each is handed over in the order
        /// it was taken (claim order), outside this lock.
        var taken = 0
        var handedOver = 0
        /// Capture order: the highest position claimed; the next claim reads after it. Everything at or below it
        /// is claimed, settled, or one of the scans `lookBelow` is for.
        var cursor = 0
        /// Capture order: a scan at or below the cursor may be pending and not in flight (an answer other than
        /// delivered or refused, a release, a reconnect, a reload): the next claim reads from the oldest pending
        /// scan, past those in flight.
        var lookBelow = true
    }

    /// One request's scans.
    private struct Job {
        var batch: DeliveryBatch
        /// Claimed while delivery was failing or paused: the one probe the backoff allows. A job claimed while
        /// healthy is not sent once delivery has failed since (its scans are released for the probe).
        var probe: Bool
        /// When a worker took it to send (monotonic): a failure of a request sent before the last recorded one is
        /// the same round's, not another probe's (`SinkHealth.failed`).
        var sentAt: Double = 0
        /// Its place among the requests workers took (see `State.taken`).
        var turn = 0
    }

    /// The thread and log name ("api", "webhook").
    public let name: String
    private let ledger: DeliveryLedger
    private let transport: any QueuedSinkTransport
    private let workerCount: Int
    private let voice: QueuedSinkVoice
    private let state: Monitor<State>
    /// The coordinator and the workers (`WorkerThread`: joinable, and an end nobody asked for is reported).
    private let workers = WorkerThreads()
    private let logger: Logger
    /// Told after health changed (failing, resumed, paused), outside the lock: `status` follows at once.
    private let healthChanged: @Sendable () -> Void
    /// Told after an outcome was recorded in the spool (its counts changed).
    private let delivered: @Sendable () -> Void
    /// Jitter in 0...1 (injected by tests).
    private let random: @Sendable () -> Double
    /// How the transport reports its connection (bound to this runner).
    private let link = QueuedSinkLink()
    /// Serialises the writes of the sink's problem to the spool, so an older one never lands after a newer one.
    private let problemWrites = Mutex(0)

    /// The backoff after failed attempts (1 s doubling to 5 min, full jitter).
    public static let backoff = Backoff(base: 1, cap: 300)
    /// How long a pause lasts before one probe is tried (a reload ends it sooner).
    public static let pauseDuration: Double = 300
    /// The wait after the spool refused our bookkeeping (a full disk): 0.5 s doubling to 30 s.
    static let spoolBackoff = Backoff(base: 0.5, cap: 30)

    /// `sink` names the queue in the spool ("api", "webhook"); `name` the threads and the service.
    public init(
        name: String, sink: String, spool: Spool, transport: any QueuedSinkTransport, workers: Int,
        voice: QueuedSinkVoice, logger: Logger, healthChanged: @escaping @Sendable () -> Void = {},
        delivered: @escaping @Sendable () -> Void = {}, backoff: Backoff = QueuedSinkRunner.backoff,
        initialHealth: SinkHealth.State = .healthy,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.name = name
        self.ledger = spool.ledger(sink)
        self.transport = transport
        self.workerCount = max(1, workers)
        self.voice = voice
        self.logger = logger
        self.healthChanged = healthChanged
        self.delivered = delivered
        self.random = random
        state = Monitor(
            State(
                health: SinkHealth(
                    backoff: backoff, pauseDuration: QueuedSinkRunner.pauseDuration, initial: initialHealth)))
        // A sink that starts `starting` must connect first: it claims nothing until its transport says so.
        state.withLock { $0.connectionDown = initialHealth == .starting }
        link.bind(self)
    }

    /// Delivery health, for `status` and the metrics.
    public var currentHealth: SinkHealth.State { state.withLock { $0.health.state } }
    public var currentStats: Stats { state.withLock { $0.stats } }

    /// Starts the coordinator and the workers.
    public func start() {
        transport.start(link)
        state.withLock {
            $0.coordinatorRunning = true
            $0.workersRunning = workerCount
        }
        for index in 0..<workerCount {
            guard let connection = transport.connect() else {
                state.update { $0.workersRunning -= 1 }
                continue
            }
            state.withLock { $0.connections.append(connection) }
            workers.start(name: "\(name)-\(index)", watched: true) { [self] in workerLoop(connection) }
        }
        workers.start(name: name, watched: true) { [self] in coordinatorLoop() }
    }

    /// A scan was committed: look for work now.
    public func wake() {
        state.update { $0.wakeRequested = true }
    }

    /// A reload (new settings reached the transport, or the same again): a pause or a backoff ends at once, for
    /// the operator fixed something (the URL, the network, the credential) and the next attempt goes now.
    public func resume() {
        let resumed = state.update { s -> Bool in
            s.wakeRequested = true
            s.lookBelow = true
            s.batchesRefused = false
            s.singly.removeAll()
            let retrying = s.health.endBackoff(clock: MonotonicClock.now())
            if retrying { s.backlogDueRequested = true }
            let resumed = s.health.endPause()
            // Said under the lock a transport's "connected" passes through (`QueuedSinkLink`), and before the
            // transport is told to connect now: the log keeps the events' order.
            if resumed {
                logger.info("\(voice.prefix) resumed: configuration reloaded")
            } else if retrying {
                logger.info(voice.reloaded)
            }
            return resumed
        }
        if resumed { healthChanged() }
        transport.resume()
    }

    /// Stops taking work; requests in flight are told to `finish` and get until one second before the monotonic
    /// `deadline` to do so, then are cancelled (their scans stay pending). Scans claimed but not yet sent are
    /// released at once.
    /// Returns when every thread has stopped or the deadline has passed.
    public func stop(deadline: Double) {
        workers.expectEnd()
        let (connections, unsent) = state.update { s in
            s.stopping = true
            let unsent = s.jobs.flatMap { $0.batch.records.map(\.id) }
            s.jobs.removeAll()
            return (s.connections, unsent)
        }
        // A request that is many messages (a broker's window of windows) ends with what is on the wire, so its
        // answers are recorded well before the deadline rather than cut off by it: told first, before any spool
        // work, which on a loaded box takes part of the budget.
        connections.forEach { $0.finish() }
        release(unsent)
        let finished: (inout State) -> Bool = { $0.workersRunning == 0 && !$0.coordinatorRunning }
        if !state.wait(until: deadline - 1, for: finished) {
            connections.forEach { $0.cancel() }
            state.wait(until: deadline, for: finished)
        }
        workers.join(until: deadline)
        transport.stop(deadline: deadline)
    }

    // MARK: coordinator

    /// What the coordinator does next, decided under the lock.
    private enum Step {
        case stop
        case claim(
            requests: Int, batchSize: Int, busy: Set<String>, inFlight: Set<String>, makeDue: Set<String>?,
            outages: Int)
        case sleep(until: Double)
    }

    private func coordinatorLoop() {
        // When the earliest unclaimed pending scan becomes due, on the monotonic clock.
        var dueAt: Double?
        loop: while true {
            let now = MonotonicClock.now()
            let step: Step = state.withLock { s in
                if s.stopping { return .stop }
                var sleepUntil = Double.infinity
                let capacity = capacity(s, now: now)
                if capacity == 0, let notBefore = s.health.notBefore, notBefore > now {
                    sleepUntil = min(sleepUntil, notBefore)
                }
                if capacity > 0 {
                    if s.wakeRequested || (dueAt.map { $0 <= now } ?? false) {
                        s.wakeRequested = false
                        defer { s.backlogDueRequested = false }
                        // Capture-order requests are large (a broker's window of windows): one a claim, so the
                        // first goes out while the next is read rather than after all of them.
                        return .claim(
                            requests: transport.order == .capture ? 1 : capacity,
                            batchSize: requestSize(&s),
                            busy: Set(s.inFlight.values),
                            inFlight: transport.order == .capture ? Set(s.inFlight.keys) : [],
                            makeDue: s.backlogDueRequested ? Set(s.inFlight.keys) : nil, outages: s.outages)
                    }
                    if let dueAt { sleepUntil = min(sleepUntil, max(dueAt, now)) }
                }
                return .sleep(until: sleepUntil)
            }
            switch step {
            case .stop:
                break loop
            case .claim(let requests, let batchSize, let busy, let inFlight, let makeDue, let outages):
                let wallNow = Date()
                if let inFlight = makeDue { _ = try? ledger.makeBackoffDue(now: wallNow, except: inFlight) }
                let claimed: [DeliveryBatch]
                do {
                    claimed = try claim(
                        now: wallNow, batches: requests, batchSize: batchSize, busy: busy, inFlight: inFlight)
                } catch {
                    spoolRefused(error, now: now)
                    dueAt = nil
                    continue
                }
                state.withLock { s in
                    if s.spoolFailures > 0 {
                        logger.info(
                            "\(voice.prefix): the spool is usable again", [("after", "\(s.spoolFailures) attempts")])
                        s.spoolFailures = 0
                    }
                }
                if !claimed.isEmpty {
                    let discarded = state.update { s -> Bool in
                        // The stop came during the claim: its jobs were already released and the workers are
                        // leaving, so these go back too rather than sit claimed. So do they when the connection was
                        // lost meanwhile (`transportFailed`).
                        if s.stopping || s.outages != outages {
                            s.lookBelow = true
                            return true
                        }
                        for batch in claimed {
                            for record in batch.records { s.inFlight[record.id] = record.identifier ?? record.id }
                            s.requests += 1
                            s.jobs.append(Job(batch: batch, probe: !s.health.isHealthy))
                        }
                        // There may be more due work than was claimed: look again as soon as there is room.
                        if claimed.count == requests { s.wakeRequested = true }
                        return false
                    }
                    if discarded { release(claimed.flatMap { $0.records.map(\.id) }) }
                    continue
                }
                // Nothing claimable. Scans to go alone that are not due now may go with others later.
                state.withLock { $0.singly.removeAll() }
                // Learn when the next identifier's head will be due (one scan of the pending rows, only then). A
                // scan waiting behind one of its identifier in flight is not counted: that worker's completion
                // wakes us. A head due now that the claim did not take (another process leased it between the
                // two queries) gets a short timer rather than a busy loop.
                let due: Date?
                switch transport.order {
                case .perIdentifier: due = (try? ledger.nextDueTime(now: wallNow)) ?? nil
                case .capture: due = (try? ledger.nextDueInCaptureOrder(now: wallNow, busy: inFlight)) ?? nil
                }
                dueAt = due.map { date in
                    let wait = date.timeIntervalSince(wallNow)
                    return wait > 0 ? now + min(wait, Spool.longestWait) : now + 0.5
                }
            case .sleep(let until):
                // A wake-up counts only once there is room to claim: with none (the backoff, every worker busy)
                // it stays set, and waiting on it alone would return at once, again and again. Room comes from a
                // worker finishing (which updates the state and so re-checks this) or the backoff's end (`until`).
                // A wake-up that brought an earlier end of the backoff (a worker's failure, just recorded) ends
                // this wait too, so the next one is set to it: nothing else would end a wait with no deadline.
                // Only a backoff still ahead counts: one that has passed stays in `notBefore` while the probe it
                // let through is in flight, and every commit's wake-up would then spin this loop until the probe
                // ends (a slow receiver's whole timeout).
                state.wait(until: until) { s in
                    guard !s.stopping else { return true }
                    guard s.wakeRequested else { return false }
                    let now = MonotonicClock.now()
                    if capacity(s, now: now) > 0 { return true }
                    return s.health.notBefore.map { $0 > now && $0 < until } ?? false
                }
            }
        }
        state.update { $0.coordinatorRunning = false }
    }

    /// Scans the next request may carry: one while requests of several are refused or some go alone; else the
    /// transport's opening size when nothing is in flight, doubling with each request claimed while others are, up
    /// to its `batchSize` (a broker's first message goes out before a whole window of windows is read).
    private func requestSize(_ s: inout State) -> Int {
        if s.batchesRefused || !s.singly.isEmpty { return 1 }
        let opening = transport.openingBatchSize
        let size = s.requests == 0 ? opening : min(transport.batchSize, max(opening, 2 * s.lastRequestSize))
        s.lastRequestSize = size
        return size
    }

    /// How many more requests may be claimed now: up to twice the workers while healthy, so a worker never waits
    /// for the next claim transaction; while failing or paused one probe at a time, once the backoff is over; none
    /// while the transport says its connection is down.
    private func capacity(_ s: State, now: Double) -> Int {
        if s.connectionDown { return 0 }
        if s.health.isHealthy { return 2 * workerCount - s.requests }
        return s.health.isOpen(at: now) && s.requests == 0 ? 1 : 0
    }

    /// Claims by the kind's rule of order: per identifier (leased, a retried batch kept whole), or in capture
    /// order (skipping the scans in flight, none behind one that is not due), cut into requests of `batchSize`.
    private func claim(now: Date, batches: Int, batchSize: Int, busy: Set<String>, inFlight: Set<String>)
        throws(SpoolError) -> [DeliveryBatch]
    {
        switch transport.order {
        case .perIdentifier:
            return try ledger.claimBatches(
                now: now, lease: transport.lease, batches: batches, batchSize: batchSize, busy: busy)
        case .capture:
            let size = max(1, batchSize)
            let (afterSeq, below) = state.withLock { s -> (Int, Bool) in
                defer { s.lookBelow = false }
                return (s.lookBelow ? 0 : s.cursor, s.lookBelow)
            }
            var items = try ledger.claimInCaptureOrder(
                now: now, afterSeq: afterSeq, limit: batches * size, busy: below ? inFlight : [])
            if items.isEmpty, !below {
                // Caught up: one look from the oldest pending scan, for one revived below the cursor (`spool retry`
                // in another process, a salvage). Cheap then: little is pending.
                items = try ledger.claimInCaptureOrder(now: now, afterSeq: 0, limit: batches * size, busy: inFlight)
            }
            state.withLock { s in s.cursor = max(s.cursor, items.last?.seq ?? 0) }
            let records = items.map(\.record)
            return stride(from: 0, to: records.count, by: size).map { start in
                let members = Array(records[start..<min(start + size, records.count)])
                return DeliveryBatch(
                    key: members.count == 1 ? members[0].id : UUID().uuidString.lowercased(), records: members)
            }
        }
    }

    // MARK: the transport's connection (`QueuedSinkLink`)

    fileprivate func transportConnected() -> Bool {
        let changed = state.update { s -> Bool in
            s.connectionDown = false
            s.lookBelow = true
            s.wakeRequested = true
            s.backlogDueRequested = true
            let before = s.health.state
            // The backoff's exponent stays until the connection has lasted (the transport forgives it then).
            _ = s.health.connected(clock: MonotonicClock.now())
            return before != s.health.state
        }
        if changed { problemChanged(nil) }
        return changed
    }

    /// The connection is gone. The requests claimed and not yet taken by a worker go back at once: claimed before
    /// the outage, they must not go out on the next connection ahead of the scans the lost one leaves unanswered
    /// (below them in capture order). Kept until a worker came back, they did when the broker was back first (seen
    /// under load: a subscriber got #447-#599 of an identifier before #95-#446).
    fileprivate func transportFailed(reason: String, replacing: Bool) -> Bool {
        let (started, changed, unsent) = state.update { s -> (Bool, Bool, [String]) in
            s.connectionDown = true
            s.outages += 1
            let unsent = QueuedSinkRunner.dropQueuedJobs(&s)
            let before = s.health.state
            if case .failing = before, !replacing { return (false, false, unsent) }
            let change = s.health.noteFailure(
                reason: reason, now: Date(), clock: MonotonicClock.now(), keepFirstReason: false)
            return (change != nil, before != s.health.state, unsent)
        }
        release(unsent)
        if changed { problemChanged(reason) }
        return started
    }

    fileprivate func transportPaused(reason: String) -> Bool {
        let (newly, unsent) = state.update { s -> (Bool, [String]) in
            s.connectionDown = true
            s.outages += 1
            let unsent = QueuedSinkRunner.dropQueuedJobs(&s)
            return (s.health.pause(reason: reason, now: Date(), clock: MonotonicClock.now()) != nil, unsent)
        }
        release(unsent)
        problemChanged(reason)
        return newly
    }

    fileprivate func transportRetryDelay(forgiving: Bool) -> Double {
        state.update { s in
            let clock = MonotonicClock.now()
            if s.health.isPaused, let notBefore = s.health.notBefore, notBefore > clock { return notBefore - clock }
            if forgiving { s.health.forgiveFailures() }
            return s.health.scheduleRetry(clock: clock, random: 0.75 + 0.25 * random())
        }
    }

    fileprivate var transportIsPaused: Bool {
        state.withLock { s in s.health.isPaused && !s.health.isOpen(at: MonotonicClock.now()) }
    }

    /// Health changed: `status` follows at once, and the sink's problem is kept in the spool for other processes
    /// (`spool stats`). The write happens outside the lock (it may wait for another writer).
    private func problemChanged(_ reason: String?) {
        problemWrites.withLock { writes in
            writes += 1
            try? ledger.recordProblem(reason, now: Date())
        }
        healthChanged()
    }

    /// The spool refuses even our bookkeeping (disk full, I/O error): back off instead of retrying at once, and
    /// say so once, not once per attempt.
    private func spoolRefused(_ error: SpoolError, now: Double) {
        let delay = state.withLock { s in
            s.spoolFailures += 1
            if s.spoolFailures == 1 {
                logger.error(
                    "\(voice.prefix): cannot use the spool; retrying with backoff", [("error", error.description)])
            }
            return QueuedSinkRunner.spoolBackoff.ceiling(attempt: s.spoolFailures)
        }
        state.wait(until: now + delay) { $0.stopping }
        state.withLock { s in if !s.stopping { s.wakeRequested = true } }
    }

    // MARK: workers

    private func workerLoop(_ connection: any QueuedSinkConnection) {
        while true {
            var job: Job?
            var unsent: [String] = []
            state.wait { s in
                if s.stopping { return true }
                guard var next = s.jobs.first else { return false }
                if !next.probe, !s.health.isHealthy {
                    // Delivery failed (or paused) since this was claimed: only the backoff's probe goes now.
                    unsent = QueuedSinkRunner.dropQueuedJobs(&s)
                    return true
                }
                s.jobs.removeFirst()
                next.turn = s.taken
                s.taken += 1
                next.sentAt = MonotonicClock.now()
                s.stats.attempts += next.batch.records.count
                job = next
                return true
            }
            if !unsent.isEmpty {
                release(unsent)
                wake()
                continue
            }
            guard let job else {
                state.update { $0.workersRunning -= 1 }
                return
            }
            // Handed over in the order the requests were taken, which is claim order: the order a capture-order
            // transport keeps. Outside the lock, so the claims and the other workers go on meanwhile.
            state.wait { $0.handedOver == job.turn }
            connection.handOver(job.batch)
            state.update { $0.handedOver += 1 }
            let (changed, backlogDueAt) = send(job, connection: connection)
            if changed { healthChanged() }
            delivered()
            // Paused (a refused credential, a redirect) or failing: the scans claimed but not yet sent stay unsent,
            // for nothing may go out during a pause (docs/contracts.md, "Outcomes") and only one probe at a time
            // while failing; they are released for the probe after it.
            let held = state.withLock { s -> [String] in
                s.health.isHealthy ? [] : QueuedSinkRunner.dropQueuedJobs(&s)
            }
            release(held)
            // Recorded first, then the identifiers are freed: the next scan of each is claimed only once this
            // one's outcome is durable.
            let except = state.withLock { s in
                for record in job.batch.records { s.inFlight.removeValue(forKey: record.id) }
                s.requests -= 1
                return Set(s.inFlight.keys)
            }
            if let now = backlogDueAt { _ = try? ledger.makeBackoffDue(now: now, except: except) }
            wake()
        }
    }

    /// Gives claimed scans that were not sent back to the queue, no attempt counted. A claim in capture order
    /// writes nothing (the runner's cursor and in-flight set are its only record), so there is nothing to undo;
    /// a leased claim is undone in one transaction.
    private func release(_ ids: [String]) {
        guard transport.order == .perIdentifier, !ids.isEmpty else { return }
        try? ledger.release(ids: ids)
    }

    /// Takes every job not yet sent off the queue; returns their scans, to be released.
    private static func dropQueuedJobs(_ s: inout State) -> [String] {
        let ids = s.jobs.flatMap { $0.batch.records.map(\.id) }
        if !ids.isEmpty { s.lookBelow = true }
        s.requests -= s.jobs.count
        s.jobs.removeAll()
        for id in ids { s.inFlight.removeValue(forKey: id) }
        return ids
    }

    /// Sends one request and records what its answer left on each scan, in one transaction. Returns whether
    /// health changed, and the time of the answer when it made the whole backlog due again (recovery).
    private func send(_ job: Job, connection: any QueuedSinkConnection) -> (
        healthChanged: Bool, backlogDueAt: Date?
    ) {
        let batch = job.batch
        var changed = false
        var backlogDueAt: Date?
        /// Health follows the outcome (under the lock); the scan's record follows from it.
        func applied(_ outcome: DeliveryOutcome?, now: Date, scans: Int = 1) -> AttemptRecord {
            let result = state.withLock { apply(outcome, scans: scans, sentAt: job.sentAt, now: now, to: &$0) }
            changed = changed || result.healthChanged
            if result.backlogDue { backlogDueAt = now }
            return QueuedSinkRunner.attemptRecord(outcome, retryAt: result.time, now: now)
        }
        let answer = connection.deliver(batch)
        let now = Date()
        var records: [(id: String, record: AttemptRecord)]
        /// Told after the spool recorded them (a reader of the log finds the spool already changed).
        var told: [(DeliveryOutcome?, String)] = []
        var keepBatch = true
        switch answer {
        case nil:  // cancelled at shutdown: not sent
            records = batch.records.map { ($0.id, .released) }
        case .whole(.dead(let reason, _))? where batch.records.count > 1:
            // Which of them was refused is not known: each goes alone, and only that one is dead.
            keepBatch = false
            records = batch.records.map { ($0.id, .released) }
            state.withLock { $0.singly.formUnion(batch.records.map(\.id)) }
            logger.warn(
                "\(voice.prefix): a request of several scans was refused; they go one by one",
                [("scans", String(batch.records.count)), ("reason", reason)])
        case .whole(let outcome)?:
            let record = applied(outcome, now: now, scans: batch.records.count)
            records = batch.records.map { ($0.id, record) }
            if batch.records.count == 1 {
                keepBatch = !QueuedSinkRunner.isFinal(outcome)
                told = [(outcome, batch.records[0].id)]
            }
        case .each(let outcomes)?:
            keepBatch = false
            let scans = batch.records.map(\.id)
            // Health follows each outcome, under one lock for the request (a broker's request is hundreds).
            let results = state.withLock { s in
                outcomes.map { apply($0, scans: 1, sentAt: job.sentAt, now: now, to: &s) }
            }
            records = zip(scans, zip(outcomes, results)).map { id, pair in
                let (outcome, result) = pair
                changed = changed || result.healthChanged
                if result.backlogDue { backlogDueAt = now }
                return (id, QueuedSinkRunner.attemptRecord(outcome, retryAt: result.time, now: now))
            }
            told = Array(zip(outcomes, scans))
        case .refused(let reason)?:
            keepBatch = false
            records = batch.records.map { ($0.id, .released) }
            let first = state.update { s in
                defer { s.batchesRefused = true }
                return !s.batchesRefused
            }
            if first {
                let line = voice.refusedBatches(reason)
                logger.warn(line.message, line.fields)
            }
        }
        state.withLock { s in
            for (id, record) in records where record != .released { s.singly.remove(id) }
            // A scan not settled by this answer is pending again below the cursor.
            if records.contains(where: { !QueuedSinkRunner.settles($0.record) }) { s.lookBelow = true }
        }
        record(batch.key, records, keepBatch: keepBatch, now: now)
        for (outcome, id) in told { voice.tell(outcome, id: id, logger: logger) }
        return (changed, backlogDueAt)
    }

    /// Writes what one answer left on its scans; a spool that refuses (a full disk) is asked again every second
    /// until it takes it or the runner stops (the scans then stay leased and go again: at least once).
    private func record(
        _ key: String, _ records: [(id: String, record: AttemptRecord)], keepBatch: Bool, now: Date
    ) {
        var failing = false
        while true {
            do {
                try ledger.recordAttempts(batch: key, records, keepBatch: keepBatch, now: now)
                if failing { logger.info("\(voice.prefix): outcomes are recorded again") }
                return
            } catch {
                if !failing {
                    failing = true
                    logger.error(
                        "\(voice.prefix): cannot record an outcome; retrying",
                        [("id", key), ("error", error.description)])
                }
                if state.wait(until: MonotonicClock.deadline(after: 1), for: { $0.stopping }) { return }
            }
        }
    }

    /// Updates health from one outcome for `scans` scans (under the lock); logs only when health changes. Returns
    /// the wall-clock time of the scans' next attempt (for a retry), whether the whole backlog is due again
    /// (recovery) and whether health changed.
    private func apply(_ outcome: DeliveryOutcome?, scans: Int, sentAt: Double, now: Date, to s: inout State) -> (
        time: Date?, backlogDue: Bool, healthChanged: Bool
    ) {
        guard let outcome else { return (nil, false, false) }
        let clock = MonotonicClock.now()
        switch outcome {
        case .delivered, .dead:
            if case .delivered = outcome { s.stats.delivered += scans } else { s.stats.dead += scans }
            guard case .resumed(let downFor, let failedAttempts, let afterPause)? = s.health.succeeded(clock: clock)
            else { return (nil, false, false) }
            let line = voice.resumed(downFor, failedAttempts, afterPause)
            logger.info(line.message, line.fields)
            return (nil, true, true)
        case .retry(let reason, let retryAfter):
            s.stats.failures += scans
            let (delay, change) = s.health.failed(
                reason: reason, retryAfter: retryAfter, now: now, clock: clock, random: random(), sentAt: sentAt)
            if change != nil {
                let line = voice.failing(reason)
                logger.warn(line.message, line.fields)
            }
            return (now.addingTimeInterval(delay), false, change != nil)
        case .authPaused(let reason), .redirected(let reason):
            s.stats.failures += scans
            guard s.health.pause(reason: reason, now: now, clock: clock) != nil else { return (nil, false, false) }
            let line = voice.paused(outcome)
            logger.error(line.message, line.fields)
            return (nil, false, true)
        }
    }

    /// Whether what an answer left on a scan takes it out of the queue (delivered or refused).
    static func settles(_ record: AttemptRecord) -> Bool {
        switch record {
        case .outcome(.delivered), .outcome(.dead): return true
        default: return false
        }
    }

    /// Delivered or dead: the scan is done. Anything else leaves a lone scan to go alone again under its own key
    /// (an answer may have been lost), never inside a batch under another.
    public static func isFinal(_ outcome: DeliveryOutcome?) -> Bool {
        switch outcome {
        case .delivered?, .dead?: return true
        default: return false
        }
    }

    /// What an outcome leaves on its scan (docs/contracts.md, "Outcomes"). A nil outcome (cancelled at
    /// shutdown) releases the scan.
    public static func attemptRecord(_ outcome: DeliveryOutcome?, retryAt: Date?, now: Date) -> AttemptRecord {
        switch outcome {
        case nil: return .released
        case .delivered(let response)?: return .outcome(.delivered(response: response))
        case .dead(let reason, let response)?: return .outcome(.dead(reason: reason, response: response))
        case .retry(let reason, _)?: return .outcome(.retry(reason: reason, nextAttempt: retryAt ?? now))
        case .authPaused(let reason)?, .redirected(let reason)?: return .paused(reason: reason)
        }
    }
}
