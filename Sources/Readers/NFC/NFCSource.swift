import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import SourceKit

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
public final class NFCSource: ReadSource {
    public let kind = SourceKind.nfc
    private let context: ReaderMonitorContext
    /// The reader monitor's thread (`WorkerThread`: joinable, and an end nobody asked for is reported).
    private let worker = Mutex<WorkerThread?>(nil)

    /// Creates the source; nothing happens before `start()`.
    ///
    /// - Parameters:
    ///   - config: `nfc` from the configuration (`readers` patterns select readers; `debounce` is the pipeline's).
    ///   - hosts: accepted Plings URL hosts: the first URI with an accepted host becomes the read's `raw`.
    ///   - submit: receives each read, on the source's thread; must not block for long.
    ///   - onTap: receives every tap with its timings and outcome, after `submit` (for `test-read` and benchmarks).
    ///   - askFirmware: ask each reader its firmware version once (`ReaderFirmware`) for `onTap`'s events.
    ///   - commit: when given, used instead of `submit`: hands the read on and calls back once it is committed
    ///     (or found a duplicate, or refused); the reader's feedback waits for that call. Without it, feedback
    ///     follows the submit at once, chosen by whether the read holds a Plings URL.
    public init(
        config: BridgeConfig.NFC, hosts: [String], logger: Logger, submit: @escaping @Sendable (Read) -> Void,
        onTap: (@Sendable (NFCTapEvent) -> Void)? = nil,
        commit: (@Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void)? = nil,
        stateChanged: @escaping @Sendable () -> Void = {}, askFirmware: Bool = false
    ) {
        var handoff = TapHandoff(parser: PlingsURLParser(hosts: hosts), submit: submit, commit: commit, onTap: onTap)
        handoff.askFirmware = askFirmware
        context = ReaderMonitorContext(
            config: config, logger: logger, control: NFCControl(stateChanged: stateChanged),
            feedback: NFCFeedback(logger: logger), handoff: handoff)
    }

    /// Starts the reader thread and the feedback thread (once; later calls do nothing).
    public func start() {
        guard context.control.markStarted() else { return }
        context.feedback.start()
        let started = WorkerThread(name: "nfc-pcsc", watched: true) { [context] in
            var monitor = ReaderMonitor(context: context)
            monitor.run()
            context.control.markFinished()
        }
        worker.withLock { $0 = started }
    }

    /// Stops the reader thread and the feedback thread together and returns when both have ended, or by `deadline`
    /// (a read in progress finishes first: tens of milliseconds; a reader's LED sequence up to 2 s).
    public func stop(deadline: Double) {
        worker.withLock { $0 }?.expectEnd()
        OwnThread.together(
            name: "nfc-stop",
            [
                { [context] in
                    if context.control.stop(deadline: deadline) == false {
                        context.logger.warn("NFC reader thread did not stop in time")
                    }
                },
                { [context] in context.feedback.stop(deadline: deadline) },
            ])
        worker.withLock { $0 }?.join(until: deadline)
    }

    /// Stops within about 1 s.
    public func stop() { stop(deadline: MonotonicClock.deadline(after: 1.0)) }

    public var statusDetails: [(String, JSONValue)] { [("feedback", feedbackCounters.json)] }

    /// What became of the feedback commands so far (for `status`).
    public var feedbackCounters: NFCFeedbackCounters { context.feedback.counters }

    /// One line for status output: `pcscd not running: waiting`, `no readers`, `1 reader: ACS ACR122U 00 00`.
    /// The source's state: a summary line, and up while at least one matching reader is watched.
    public var state: SourceState { context.control.sourceState }

    public var summary: String { state.summary }

    /// True when `reader` matches one of `patterns` (shell-style, `fnmatch`), or there are no patterns.
    public static func matches(_ reader: String, patterns: [String]) -> Bool {
        patterns.isEmpty || patterns.contains { fnmatch($0, reader, 0) == 0 }
    }
}
