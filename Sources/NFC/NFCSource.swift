import BridgeCore
import Foundation
import Glibc
import Logging
import Platform

/// The NFC source: watches PC/SC readers through pcscd and turns each tap into one `Read`.
///
/// One dedicated thread owns the PC/SC context and blocks in `SCardGetStatusChange(INFINITE)` (docs/architecture.md: a
/// blocking C call never runs inside a Task or on a global queue). The wait set always holds
/// `\\?PnP?\Notification`, so it works with zero readers and wakes when readers come and go; the readers are
/// re-listed after every wake-up. pcscd absent, stopped or restarted loses the context: the thread backs off,
/// logs one line, and establishes a new context when pcscd is back. `stop()` calls `SCardCancel` from the
/// calling thread to unblock the wait.
///
/// One read per tap: pcsc-lite counts card events per reader in the upper 16 bits of `dwEventState`. A card
/// is read when the reader shows a card and its counter differs from the one last handled, so a tag left on
/// the reader is read once, and a tag removed and tapped again between two waits (the flags look unchanged)
/// is a new read. A failed read (card removed mid-read, garbage, a phone) logs one line and is not retried:
/// the next tap reads. A card already on a reader when the source starts is read (this process never read it);
/// one that lay on a reader, already read, when pcscd went away is not read again after the reconnect (best
/// effort: if the source reconnects before the new pcscd has seen the card, it is read again once).
public final class NFCSource: Sendable {
    private struct Shared: Sendable {
        var started = false
        var stopping = false
        var finished = false
        /// The live context's handle, so `stop()` can cancel the wait.
        var contextHandle: Int?
        var summary = "not started"
    }

    private let config: BridgeConfig.NFC
    private let parser: PlingsURLParser
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    private let commit: (@Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void)?
    private let onTap: (@Sendable (NFCTapEvent) -> Void)?
    let feedback: NFCFeedback
    private let shared = Mutex(Shared())
    /// Wakes back-off sleeps and `stop()`'s wait for the thread (a change counter; waits are monotonic).
    private let wakeup = Monitor(0)

    /// Creates the source; nothing happens before `start()`.
    ///
    /// - Parameters:
    ///   - config: `nfc` from the configuration (`readers` patterns select readers; `debounce` is the pipeline's).
    ///   - hosts: accepted Plings URL hosts: the first URI with an accepted host becomes the read's `raw`.
    ///   - submit: receives each read, on the source's thread; must not block for long.
    ///   - onTap: receives every tap with its timings and outcome, after `submit` (for `test-read` and benchmarks).
    ///   - commit: when given, used instead of `submit`: hands the read on and calls back once it is committed
    ///     (or found a duplicate, or refused); the reader's feedback waits for that call. Without it, feedback
    ///     follows the submit at once, chosen by whether the read holds a Plings URL.
    public init(
        config: BridgeConfig.NFC, hosts: [String], logger: Logger, submit: @escaping @Sendable (Read) -> Void,
        onTap: (@Sendable (NFCTapEvent) -> Void)? = nil,
        commit: (@Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void)? = nil
    ) {
        self.config = config
        self.parser = PlingsURLParser(hosts: hosts)
        self.logger = logger
        self.submit = submit
        self.commit = commit
        self.onTap = onTap
        self.feedback = NFCFeedback(logger: logger)
    }

    /// Starts the reader thread (once; later calls do nothing).
    public func start() {
        let first = shared.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            state.summary = "starting"
            return true
        }
        guard first else { return }
        let thread = Thread { [self] in
            var monitor = ReaderMonitor(source: self)
            monitor.run()
            shared.withLock {
                $0.finished = true; $0.contextHandle = nil
            }
            wakeup.update { $0 &+= 1 }
        }
        thread.name = "nfc-pcsc"
        thread.start()
    }

    /// Stops the reader thread and returns when it has ended, within about 1 s (a read in progress finishes
    /// first; it takes tens of milliseconds).
    public func stop() {
        let running = shared.withLock { state -> Bool in
            state.stopping = true
            return state.started && !state.finished
        }
        guard running else { return }
        let deadline = MonotonicClock.deadline(after: 1.0)
        while !shared.withLock({ $0.finished }) {
            // Cancel under the lock that guards the handle, so the context cannot be released meanwhile. The
            // cancel is repeated because one sent just before the thread entered the wait would be lost.
            shared.withLock { state in
                if let handle = state.contextHandle { PCSCContext.cancel(handle: handle) }
            }
            wakeup.update { $0 &+= 1 }
            if MonotonicClock.now() >= deadline { break }
            wakeup.wait(until: min(deadline, MonotonicClock.now() + 0.05)) { _ in shared.withLock { $0.finished } }
        }
        if !shared.withLock({ $0.finished }) {
            logger.warn("NFC reader thread did not stop within 1 s")
        }
        feedback.stop()
    }

    /// What became of the feedback commands so far (for `status`).
    public var feedbackCounters: NFCFeedbackCounters { feedback.counters }

    /// One line for status output: `pcscd not running: waiting`, `no readers`, `1 reader: ACS ACR122U 00 00`.
    public var summary: String { shared.withLock { $0.summary } }

    // MARK: for the monitor thread

    var isStopping: Bool { shared.withLock { $0.stopping } }

    func setSummary(_ text: String) { shared.withLock { $0.summary = text } }

    /// Publishes (or clears) the context handle `stop()` cancels. Returns false when stopping already.
    @discardableResult
    func publish(contextHandle: Int?) -> Bool {
        shared.withLock { state in
            state.contextHandle = contextHandle
            return !state.stopping
        }
    }

    /// Sleeps up to `seconds` unless `stop()` is called.
    func pause(_ seconds: Double) {
        wakeup.wait(until: MonotonicClock.deadline(after: seconds)) { _ in isStopping }
    }

    var readerPatterns: [String] { config.readers }
    var log: Logger { logger }

    /// True when `reader` matches one of `patterns` (shell-style, `fnmatch`), or there are no patterns.
    public static func matches(_ reader: String, patterns: [String]) -> Bool {
        patterns.isEmpty || patterns.contains { fnmatch($0, reader, 0) == 0 }
    }

    /// The `Read` for a completed tag read: the first URI whose host is accepted, else the first URI, else
    /// empty (then `noURLReason` says why).
    func makeRead(reader: String, result: TagReadResult, detectedAt: Date) -> Read {
        let raw = NFCSource.chooseURI(result.uris, parser: parser) ?? ""
        return Read(
            sourceKind: .nfc, device: reader, uid: result.uid.map(NFCSource.hex), raw: raw, time: detectedAt,
            noURLReason: result.uris.isEmpty ? (result.noURLReason ?? "no URI record on the tag") : nil)
    }

    /// A valid Plings URL first; else the first URI on an accepted host (the pipeline says what is wrong with
    /// it); else the first URI (the pipeline marks it unrecognized).
    static func chooseURI(_ uris: [String], parser: PlingsURLParser) -> String? {
        var acceptedHost: String?
        for uri in uris {
            switch parser.parse(uri) {
            case .success:
                return uri
            case .failure(let reason):
                if acceptedHost == nil, Self.hostAccepted(reason) { acceptedHost = uri }
            }
        }
        return acceptedHost ?? uris.first
    }

    private static func hostAccepted(_ reason: UnrecognizedReason) -> Bool {
        switch reason {
        case .hostNotAccepted, .notAURL, .unsupportedScheme, .empty, .tooLong, .noURL: return false
        default: return true
        }
    }

    var nfcConfig: BridgeConfig.NFC { config }

    /// The profile of `reader`: `nfc.profiles` first, else recognised by name.
    func profile(for reader: String) -> ReaderProfile {
        ReaderProfile.resolve(readerName: reader, rules: config.profiles)
    }

    /// True when the read's URL is a valid Plings URL (it will be spooled as pending).
    func isRecognized(_ read: Read) -> Bool {
        if case .success = parser.parse(read.raw) { return true }
        return false
    }

    /// Hands the read on; `then` gets the feedback outcome once it is committed (or at once without `commit`).
    func deliver(_ read: Read, then: @escaping @Sendable (FeedbackOutcome) -> Void) {
        let recognized = isRecognized(read)
        guard let commit else {
            submit(read)
            then(recognized ? .accepted : .unrecognized)
            return
        }
        commit(read) { result in
            switch result {
            case .committed(let pending): then(pending ? .accepted : .unrecognized)
            case .duplicate: then(recognized ? .accepted : .unrecognized)
            case .refused: then(.failed)
            }
        }
    }

    func report(_ event: NFCTapEvent) { onTap?(event) }

    /// Lower-case hex without separators, as the spool stores UIDs.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        var text = ""
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return text
    }
}

/// What the pipeline did with a read the NFC source handed on (chooses the feedback).
public enum CommitResult: Sendable, Equatable {
    /// On disk; `pending` true for a Plings scan, false for one spooled as unrecognized.
    case committed(pending: Bool)
    /// A repeat inside the debounce window: the first read is already on disk.
    case duplicate
    /// The spool refused it: nothing was accepted.
    case refused
}
