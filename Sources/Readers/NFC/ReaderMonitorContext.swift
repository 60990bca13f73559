import BridgeCore
import Foundation
import Glibc
import Logging
import Platform

/// Everything `ReaderMonitor` needs from outside its thread, and nothing more: the settings it reads, the log,
/// the control it shares with `NFCSource.stop()`, the feedback queue, and where finished reads go. The monitor
/// never sees the source itself.
struct ReaderMonitorContext: Sendable {
    /// `nfc` from the configuration: reader patterns, profiles, detect-beep silencing, feedback patterns.
    let config: BridgeConfig.NFC
    let logger: Logger
    let control: NFCControl
    let feedback: NFCFeedback
    let handoff: TapHandoff

    /// True when `reader` is selected by `nfc.readers`.
    func selects(_ reader: String) -> Bool { NFCSource.matches(reader, patterns: config.readers) }

    /// The profile of `reader`: `nfc.profiles` first, else recognised by name.
    func profile(for reader: String) -> ReaderProfile {
        ReaderProfile.resolve(readerName: reader, rules: config.profiles)
    }
}

/// The state `NFCSource` and its monitor thread share: started/stopping/finished, the live PC/SC context's
/// handle (so `stop()` can cancel the blocking wait), and the source's state (summary, up).
final class NFCControl: Sendable {
    private struct Shared: Sendable {
        var started = false
        var stopping = false
        var finished = false
        /// The live context's handle, so `stop()` can cancel the wait.
        var contextHandle: Int?
        var state = SourceState("not started", up: false)
    }

    private let shared = Mutex(Shared())
    /// Told after the state changed (`SourceContext.stateChanged`).
    private let stateChanged: @Sendable () -> Void
    /// Wakes back-off sleeps and `stop()`'s wait for the thread (a change counter; waits are monotonic).
    private let wakeup = Monitor(0)
    /// Ends a wait for pcscd's socket (`pause(_:watching:)`) when `stop()` is called.
    private let wakePipe = WakePipe()

    init(stateChanged: @escaping @Sendable () -> Void = {}) { self.stateChanged = stateChanged }

    /// True the first time only: the caller starts the thread.
    func markStarted() -> Bool {
        shared.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            state.state = SourceState("starting", up: false)
            return true
        }
    }

    /// Called by the monitor thread as it ends.
    func markFinished() {
        shared.withLock {
            $0.finished = true
            $0.contextHandle = nil
        }
        wakeup.update { $0 &+= 1 }
    }

    /// Stops the thread: cancels its wait until it has ended or `deadline` passes. Returns whether it ended,
    /// nil when it was not running.
    func stop(deadline: Double) -> Bool? {
        let running = shared.withLock { state -> Bool in
            state.stopping = true
            return state.started && !state.finished
        }
        guard running else { return nil }
        while !isFinished {
            // Cancel under the lock that guards the handle, so the context cannot be released meanwhile. The
            // cancel is repeated because one sent just before the thread entered the wait would be lost.
            shared.withLock { state in
                if let handle = state.contextHandle { PCSCContext.cancel(handle: handle) }
            }
            wakeup.update { $0 &+= 1 }
            wakePipe?.signal()
            if MonotonicClock.now() >= deadline { break }
            wakeup.wait(until: min(deadline, MonotonicClock.now() + 0.05)) { _ in isFinished }
        }
        return isFinished
    }

    private var isFinished: Bool { shared.withLock { $0.finished } }

    var isStopping: Bool { shared.withLock { $0.stopping } }

    /// The source's state as the monitor thread last set it.
    var sourceState: SourceState {
        get { shared.withLock { $0.state } }
        set {
            let changed = shared.withLock { shared in
                defer { shared.state = newValue }
                return shared.state != newValue
            }
            if changed { stateChanged() }
        }
    }

    /// Publishes (or clears) the context handle `stop()` cancels. Returns false when stopping already.
    @discardableResult
    func publish(contextHandle: Int?) -> Bool {
        shared.withLock { state in
            state.contextHandle = contextHandle
            return !state.stopping
        }
    }

    /// Sleeps up to `seconds` unless `stop()` is called, or, with `watch`, something appears in the watched
    /// directory (pcscd's socket).
    func pause(_ seconds: Double, watching watch: DirectoryWatch? = nil) {
        let deadline = MonotonicClock.deadline(after: seconds)
        if let watch, let wakePipe {
            if !isStopping { _ = watch.wait(until: deadline, orWake: wakePipe.readFD) }
            return
        }
        wakeup.wait(until: deadline) { _ in isStopping }
    }
}

/// Where a finished tap goes: the `Read` built from it, handed to `submit` or `commit`, and the tap's timings
/// to `onTap`.
struct TapHandoff: Sendable {
    let parser: PlingsURLParser
    let submit: @Sendable (Read) -> Void
    let commit: (@Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void)?
    let onTap: (@Sendable (NFCTapEvent) -> Void)?
    /// Ask each reader its firmware version once, after its first read (`test-read`'s report).
    var askFirmware = false

    /// The `Read` for a completed tag read: the first URI whose host is accepted, else the first URI, else
    /// empty (then `noURLReason` says why).
    func makeRead(device: String, result: TagReadResult, detectedAt: Date, genuine: Originality? = nil) -> Read {
        let raw = Self.chooseURI(result.uris, parser: parser) ?? ""
        return Read(
            sourceKind: .nfc, device: device, uid: result.uid.map(NFCHex.uid), raw: raw, time: detectedAt,
            noURLReason: result.uris.isEmpty ? (result.noURLReason ?? "no URI record on the tag") : nil,
            genuine: genuine)
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
        commit(read) { result in then(FeedbackOutcome(result, recognized: recognized)) }
    }

    func report(_ event: NFCTapEvent) { onTap?(event) }
}
