import BridgeCore
import Foundation
import Logging
import Spool
import Platform

/// What happened to one submitted read.
public enum ReadOutcome: Sendable {
    /// Committed to the spool (pending or unrecognized).
    case accepted(NewScan)
    /// A repeat inside the debounce window: one read, already counted.
    case debounced
    /// The spool refused it (disk full, I/O error): the read is lost and this says so.
    case refused(String)
}

/// Turns reads into scans and commits them to the spool (docs/architecture.md): debounce, couple the fix fresh
/// at the moment of the read, parse, build the input, commit, then tell the sinks.
///
/// Sources call `submit` from their own threads; a dedicated thread (started by `start`) commits. Reads that
/// arrive while a commit is in progress are committed together in the next transaction (group commit): under a
/// burst, one fsync covers many reads, and no read is acknowledged before its transaction is durable.
public final class Pipeline: Service {
    /// One read waiting for the committer, with what was decided at submit time.
    private struct Pending: Sendable {
        var read: Read
        var fix: LocationFix?
        var monotonic: Double
        var completion: (@Sendable (ReadOutcome) -> Void)?
    }

    private struct Queue {
        var items: [Pending] = []
        var stopping = false
        var running = false
        /// `MonotonicClock` time the commit thread took its current batch; nil while it waits for reads.
        var busySince: Double?
    }

    public let name = "pipeline"
    private let spool: Spool
    private let builder: Mutex<ScanBuilder>
    private let fixProvider: any FixProvider
    private let debounceWindows: Mutex<[SourceKind: Double]>
    private let logger: Logger
    private let onCommitted: @Sendable ([NewScan]) -> Void
    /// Maps a read's system time to the time to record (GPS time when the clock is found wrong and
    /// `location.timeFromGPS` is set; identity otherwise).
    private let timeSource: @Sendable (Date) -> Date
    /// What a read's time rests on, given its system time and whether GPS time replaced it
    /// (`Pipeline.systemClockBasis` unless a test gives its own).
    private let clockBasis: @Sendable (Date, Bool) -> ClockBasis?
    private let queue = Monitor(Queue())
    /// The commit thread (`WorkerThread`: joinable, and an end nobody asked for is reported).
    private let worker = Mutex<WorkerThread?>(nil)
    private let tally = Mutex(Tally())

    /// Reads counted by source and outcome, and the last read per device (for `status` and metrics).
    public struct Tally: Sendable {
        /// What became of a read, as counted (the `outcome` label of `plings_bridge_reads_total`).
        public enum Outcome: String, Sendable, Comparable, CaseIterable {
            /// Committed as a scan to deliver.
            case pending
            /// Committed as a read that is not a Plings URL.
            case unrecognized
            /// A repeat inside the debounce window.
            case debounced
            /// The spool refused it.
            case refused

            public static func < (a: Outcome, b: Outcome) -> Bool { a.rawValue < b.rawValue }
        }

        /// A count's key: one source kind and one outcome.
        public struct Key: Sendable, Hashable, Comparable, CustomStringConvertible {
            public var source: SourceKind
            public var outcome: Outcome
            public init(source: SourceKind, outcome: Outcome) {
                self.source = source
                self.outcome = outcome
            }
            /// `nfc/pending`: the key's name in `status` (docs/contracts.md).
            public var description: String { "\(source.rawValue)/\(outcome.rawValue)" }
            public static func < (a: Key, b: Key) -> Bool { a.description < b.description }
        }

        /// A device's key: its source kind and device name; `nfc:ACS ACR122U 00 00` in `status`.
        public struct Device: Sendable, Hashable, Comparable, CustomStringConvertible {
            public var source: SourceKind
            public var name: String
            public init(source: SourceKind, name: String) {
                self.source = source
                self.name = name
            }
            public var description: String { "\(source.rawValue):\(name)" }
            public static func < (a: Device, b: Device) -> Bool { a.description < b.description }
        }

        public var reads: [Key: Int] = [:]
        public var lastRead: [Device: (time: Date, outcome: Outcome)] = [:]
        public var lastError: String?
    }

    public var currentTally: Tally { tally.withLock { $0 } }

    private func count(_ read: Read, _ outcome: Tally.Outcome) {
        tally.withLock {
            $0.reads[Tally.Key(source: read.sourceKind, outcome: outcome), default: 0] += 1
            $0.lastRead[Tally.Device(source: read.sourceKind, name: read.device)] = (read.time, outcome)
        }
    }

    /// Maximum reads per transaction: bounds the latency of the first read in a huge burst.
    public static let maximumBatch = 256

    public init(
        spool: Spool, builder: ScanBuilder, fixProvider: any FixProvider, debounce: [SourceKind: Double],
        logger: Logger, onCommitted: @escaping @Sendable ([NewScan]) -> Void = { _ in },
        timeSource: @escaping @Sendable (Date) -> Date = { $0 },
        clockBasis: @escaping @Sendable (Date, Bool) -> ClockBasis? = Pipeline.systemClockBasis
    ) {
        self.timeSource = timeSource
        self.clockBasis = clockBasis
        self.spool = spool
        self.builder = Mutex(builder)
        self.fixProvider = fixProvider
        self.debounceWindows = Mutex(debounce)
        self.logger = logger
        self.onCommitted = onCommitted
    }

    /// The basis of a read made at `systemTime` by this system's clocks: this boot, `CLOCK_BOOTTIME` at the read,
    /// and trusted when GPS time stamped the read or the system's clock is trusted (`ClockTrust`: synchronised by
    /// NTP, or set from a hardware clock at boot).
    public static func systemClockBasis(_ systemTime: Date, gpsTime: Bool) -> ClockBasis? {
        ClockBasis.of(
            readTime: systemTime, wallNow: Date(), bootNow: SystemClock.bootTime(), bootID: SystemClock.bootID,
            trusted: gpsTime || ClockTrust.ofSystem(now: systemTime).isTrusted)
    }

    /// Starts the commit thread.
    public func start() {
        queue.withLock { $0.running = true }
        let started = WorkerThread(name: "pipeline", watched: true) { [self] in self.commitLoop() }
        worker.withLock { $0 = started }
    }

    /// Applies a reloaded configuration to reads submitted from now on.
    public func update(builder: ScanBuilder, debounce: [SourceKind: Double]) {
        self.builder.withLock { $0 = builder }
        debounceWindows.withLock { $0 = debounce }
    }

    /// Hands a read to the pipeline. The fix is taken now, at the moment of the read, from memory, and so is what
    /// the read's time rests on (`ClockBasis`).
    public func submit(_ read: Read, completion: (@Sendable (ReadOutcome) -> Void)? = nil) {
        var read = read
        let systemTime = read.time
        read.time = timeSource(systemTime)
        if read.clock == nil { read.clock = clockBasis(systemTime, read.time != systemTime) }
        let item = Pending(
            read: read, fix: fixProvider.currentFix(), monotonic: MonotonicClock.now(), completion: completion)
        let accepted = queue.update { q -> Bool in
            guard !q.stopping, q.running else { return false }
            q.items.append(item)
            return true
        }
        if !accepted { completion?(.refused("the service is stopping")) }
    }

    /// Hands a read on and reports its commit as a source's good-read feedback needs it (`SourceContext`).
    public func commit(_ read: Read, then done: @escaping @Sendable (CommitResult) -> Void) {
        submit(read) { outcome in
            switch outcome {
            case .accepted(let scan): done(.committed(pending: scan.state == .pending))
            case .debounced: done(.duplicate)
            case .refused: done(.refused)
            }
        }
    }

    /// True unless the commit thread has been inside one commit for longer than `timeout` seconds (for the
    /// systemd watchdog: a thread stuck in a commit must stop the pings). Answers at once, without waiting.
    public func isResponsive(within timeout: Double) -> Bool {
        queue.withLock { q in
            guard q.running, let since = q.busySince else { return q.running }
            return MonotonicClock.now() - since < timeout
        }
    }

    /// Submits and waits for the outcome, blocking the calling thread (the `scan` command's main thread).
    public func accept(_ read: Read) -> ReadOutcome {
        let outcome = Monitor<ReadOutcome?>(nil)
        submit(read) { result in outcome.update { $0 = result } }
        var result = ReadOutcome.refused("the pipeline gave no outcome")
        outcome.wait { value in
            if let value { result = value }
            return value != nil
        }
        return result
    }

    /// Commits everything already submitted, then stops the thread. Returns when done or at `deadline`.
    public func stop(deadline: Double) {
        worker.withLock { $0 }?.expectEnd()
        queue.update { $0.stopping = true }
        worker.withLock { $0 }?.join(until: deadline)
    }

    /// `stop(deadline:)` with a deadline `timeout` seconds from now.
    public func stop(timeout: Double = 4) { stop(deadline: MonotonicClock.deadline(after: timeout)) }

    private func commitLoop() {
        var debouncer: [SourceKind: Debouncer] = [:]
        while true {
            var batch: [Pending] = []
            var stop = false
            queue.wait { q in
                let n = min(q.items.count, Pipeline.maximumBatch)
                batch = Array(q.items.prefix(n))
                q.items.removeFirst(n)
                stop = q.stopping && q.items.isEmpty
                if !batch.isEmpty { q.busySince = MonotonicClock.now() }
                return !batch.isEmpty || stop
            }
            if !batch.isEmpty { commit(batch, debouncer: &debouncer) }
            queue.withLock { $0.busySince = nil }
            if stop {
                queue.update { $0.running = false }
                return
            }
        }
    }

    private func commit(_ batch: [Pending], debouncer: inout [SourceKind: Debouncer]) {
        let windows = debounceWindows.withLock { $0 }
        let builder = self.builder.withLock { $0 }
        var scans: [NewScan] = []
        var waiting: [(NewScan, (@Sendable (ReadOutcome) -> Void)?)] = []
        for item in batch {
            let kind = item.read.sourceKind
            let window = windows[kind] ?? 0
            if debouncer[kind]?.window != window { debouncer[kind] = Debouncer(window: window) }
            let payload = item.read.raw + "\u{1F}" + (item.read.uid ?? "")
            if debouncer[kind]?.accept(device: item.read.device, payload: payload, now: item.monotonic) == false {
                logger.debug("duplicate read ignored", [("source", kind.rawValue), ("device", item.read.device)])
                count(item.read, .debounced)
                item.completion?(.debounced)
                continue
            }
            let scan = builder.build(item.read, fix: item.fix)
            scans.append(scan)
            waiting.append((scan, item.completion))
        }
        guard !scans.isEmpty else { return }
        // Capture order within the batch: reads arrive in the order their sources completed them, and an NFC read
        // (stamped when the card was detected) completes a tag read later, so another device's newer read may be
        // submitted first. Sorted by time (stable) before they get their `seq` (docs/contracts.md, "Delivery order").
        scans = scans.enumerated().sorted { ($0.element.read.time, $0.offset) < ($1.element.read.time, $1.offset) }
            .map(\.element)
        do {
            try spool.insert(scans)
        } catch {
            // Nothing of this batch is committed: say so once per batch, for every read in it.
            logger.error(
                "read refused: could not commit to the spool",
                [("reads", String(scans.count)), ("error", error.description)])
            for (scan, completion) in waiting {
                count(scan.read, .refused)
                completion?(.refused(error.description))
            }
            tally.withLock { $0.lastError = error.description }
            return
        }
        for scan in scans {
            logger.info(
                scan.state == .pending ? "scan accepted" : "read unrecognized",
                [("id", scan.id), ("source", scan.read.sourceKind.rawValue), ("device", scan.read.device)]
                    + (scan.read.uid.map { [("uid", $0)] } ?? []) + (scan.reason.map { [("reason", $0)] } ?? []))
        }
        for scan in scans { count(scan.read, scan.state == .pending ? .pending : .unrecognized) }
        onCommitted(scans)
        for (scan, completion) in waiting { completion?(.accepted(scan)) }
    }
}
