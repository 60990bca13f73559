import BridgeCore
import Foundation
import Logging
import Spool
import Synchronization

/// What happened to one submitted read.
public enum ReadOutcome: Sendable {
    /// Committed to the spool (pending or unrecognized).
    case accepted(NewScan)
    /// A repeat inside the debounce window: one read, already counted.
    case debounced
    /// The spool refused it (disk full, I/O error): the read is lost and this says so.
    case refused(String)
}

/// Turns reads into scans and commits them to the spool (design 1): debounce, couple the fix fresh at the
/// moment of the read, parse, build the input, commit, then tell the forwarder.
///
/// Sources call `submit` from their own threads; a dedicated thread commits. Reads that arrive while a commit
/// is in progress are committed together in the next transaction (group commit): under a burst, one fsync
/// covers many reads, and no read is acknowledged before its transaction is durable.
public final class Pipeline: Sendable {
    /// One read waiting for the committer, with what was decided at submit time.
    private struct Pending: Sendable {
        var read: Read
        var fix: LocationFix?
        var monotonic: Double
        var completion: (@Sendable (ReadOutcome) -> Void)?
    }

    private struct Queue: Sendable {
        var items: [Pending] = []
        var stopping = false
        var stopped = false
    }

    private let spool: Spool
    private let builder: Mutex<ScanBuilder>
    private let fixProvider: any FixProvider
    private let debounceWindows: Mutex<[SourceKind: Double]>
    private let logger: Logger
    private let onCommitted: @Sendable ([NewScan]) -> Void
    /// Maps a read's system time to the time to record (GPS time when the clock is found wrong and
    /// `location.timeFromGPS` is set; identity otherwise).
    private let timeSource: @Sendable (Date) -> Date
    private let queue = Mutex(Queue())
    private let tally = Mutex(Tally())

    /// Reads counted by source and outcome, and the last read per device (for `status` and metrics).
    public struct Tally: Sendable {
        /// "source/outcome" (outcome: pending, unrecognized, debounced, refused) -> count.
        public var reads: [String: Int] = [:]
        public var lastRead: [String: (time: Date, outcome: String)] = [:]
        public var lastError: String?
    }

    public var currentTally: Tally { tally.withLock { $0 } }

    private func count(_ read: Read, _ outcome: String) {
        tally.withLock {
            $0.reads["\(read.sourceKind.rawValue)/\(outcome)", default: 0] += 1
            $0.lastRead["\(read.sourceKind.rawValue):\(read.device)"] = (read.time, outcome)
        }
    }
    private let wakeup = NSCondition()
    /// Maximum reads per transaction: bounds the latency of the first read in a huge burst.
    public static let maximumBatch = 256

    public init(
        spool: Spool, builder: ScanBuilder, fixProvider: any FixProvider, debounce: [SourceKind: Double],
        logger: Logger, onCommitted: @escaping @Sendable ([NewScan]) -> Void = { _ in },
        timeSource: @escaping @Sendable (Date) -> Date = { $0 }
    ) {
        self.timeSource = timeSource
        self.spool = spool
        self.builder = Mutex(builder)
        self.fixProvider = fixProvider
        self.debounceWindows = Mutex(debounce)
        self.logger = logger
        self.onCommitted = onCommitted
        let thread = Thread { [self] in self.commitLoop() }
        thread.name = "pipeline"
        thread.start()
    }

    /// Applies a reloaded configuration to reads submitted from now on.
    public func update(builder: ScanBuilder, debounce: [SourceKind: Double]) {
        self.builder.withLock { $0 = builder }
        debounceWindows.withLock { $0 = debounce }
    }

    /// Hands a read to the pipeline. The fix is taken now, at the moment of the read, from memory.
    public func submit(_ read: Read, completion: (@Sendable (ReadOutcome) -> Void)? = nil) {
        var read = read
        read.time = timeSource(read.time)
        let item = Pending(
            read: read, fix: fixProvider.currentFix(), monotonic: MonotonicClock.now(), completion: completion)
        let accepted = queue.withLock { q -> Bool in
            guard !q.stopping else { return false }
            q.items.append(item)
            return true
        }
        guard accepted else {
            completion?(.refused("the service is stopping"))
            return
        }
        wakeup.lock()
        wakeup.signal()
        wakeup.unlock()
    }

    /// True when the commit thread takes and answers an empty round trip within `timeout` seconds
    /// (for the systemd watchdog: a thread stuck in a commit must stop the pings).
    public func isResponsive(within timeout: Double) -> Bool {
        let answered = DispatchSemaphore(value: 0)
        let ping = Pending(
            read: Read(sourceKind: .manual, device: Pipeline.pingDevice, raw: "", time: Date()), fix: nil,
            monotonic: 0, completion: { _ in answered.signal() })
        queue.withLock { $0.items.append(ping) }
        wakeup.lock()
        wakeup.signal()
        wakeup.unlock()
        return answered.wait(timeout: .now() + timeout) == .success
    }

    /// The device name of watchdog pings: answered by the commit thread, never spooled.
    static let pingDevice = "\u{0}watchdog"

    /// Submits and waits for the outcome.
    public func accept(_ read: Read) async -> ReadOutcome {
        await withCheckedContinuation { continuation in
            submit(read) { continuation.resume(returning: $0) }
        }
    }

    /// Commits everything already submitted, then stops the thread. Returns when done or after `timeout`.
    public func stop(timeout: Double = 4) {
        queue.withLock { $0.stopping = true }
        wakeup.lock()
        wakeup.broadcast()
        let deadline = Date().addingTimeInterval(timeout)
        while !queue.withLock({ $0.stopped }) {
            if !wakeup.wait(until: deadline) { break }
        }
        wakeup.unlock()
    }

    private func commitLoop() {
        var debouncer: [SourceKind: Debouncer] = [:]
        while true {
            wakeup.lock()
            var batch: [Pending] = []
            var stop = false
            while true {
                (batch, stop) = queue.withLock { q in
                    let n = min(q.items.count, Pipeline.maximumBatch)
                    let taken = Array(q.items.prefix(n))
                    q.items.removeFirst(n)
                    return (taken, q.stopping && q.items.isEmpty)
                }
                if !batch.isEmpty || stop { break }
                wakeup.wait()
            }
            wakeup.unlock()
            if !batch.isEmpty { commit(batch, debouncer: &debouncer) }
            if stop {
                queue.withLock { $0.stopped = true }
                wakeup.lock()
                wakeup.broadcast()
                wakeup.unlock()
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
            if item.read.device == Pipeline.pingDevice {
                item.completion?(.debounced)
                continue
            }
            let kind = item.read.sourceKind
            let window = windows[kind] ?? 0
            if debouncer[kind]?.window != window { debouncer[kind] = Debouncer(window: window) }
            let payload = item.read.raw + "\u{1F}" + (item.read.uid ?? "")
            if debouncer[kind]?.accept(device: item.read.device, payload: payload, now: item.monotonic) == false {
                logger.debug("duplicate read ignored", [("source", kind.rawValue), ("device", item.read.device)])
                count(item.read, "debounced")
                item.completion?(.debounced)
                continue
            }
            let scan = builder.build(item.read, fix: item.fix)
            scans.append(scan)
            waiting.append((scan, item.completion))
        }
        guard !scans.isEmpty else { return }
        do {
            try spool.insert(scans)
        } catch {
            // Nothing of this batch is committed: say so once per batch, for every read in it.
            logger.error(
                "read refused: could not commit to the spool",
                [("reads", String(scans.count)), ("error", error.description)])
            for (scan, completion) in waiting {
                count(scan.read, "refused")
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
        for scan in scans { count(scan.read, scan.state.rawValue) }
        onCommitted(scans)
        for (scan, completion) in waiting { completion?(.accepted(scan)) }
    }
}

/// Seconds from an arbitrary origin that never jump with the wall clock (CLOCK_MONOTONIC).
public enum MonotonicClock {
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
