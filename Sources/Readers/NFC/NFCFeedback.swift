import BridgeCore
import CPCSCLite
import Foundation
import Logging
import Platform

/// Feedback counters for `status`: what became of the beep/LED commands and detect-beep silencing.
public struct NFCFeedbackCounters: Sendable, Equatable {
    /// Feedback commands the reader acknowledged.
    public var sent = 0
    /// Feedback for a tag that had already left (the ACR122U command needs it present): nothing shown.
    public var tagGone = 0
    /// Feedback the reader refused or that failed below it (escapes disabled, pcscd gone, ...).
    public var refused = 0
    /// Readers whose detect beep was turned off (or found off).
    public var detectBeepSilenced = 0
    /// The last refusal, one line.
    public var lastProblem: String?

    public init() {}

    /// The counters as a JSON object for `status.json`.
    public var json: JSONValue {
        .object([
            ("sent", .integer(sent)), ("tagGone", .integer(tagGone)), ("refused", .integer(refused)),
            ("detectBeepSilenced", .integer(detectBeepSilenced)),
            ("lastProblem", lastProblem.map(JSONValue.string) ?? .null),
        ])
    }
}

/// Sends beep/LED feedback and detect-beep silencing on a thread of its own, with its own PC/SC context, so
/// neither the reads (the monitor thread, blocked in `SCardGetStatusChange` on its context) nor the commits wait
/// for a reader's LED sequence. A job for a tag that left, or one the reader refuses, is counted and logged at
/// debug level; it never touches a read.
final class NFCFeedback: Sendable {
    struct Job: Sendable {
        var reader: String
        var profile: ReaderProfile
        /// The pattern to show; nil for a silence-only job.
        var pattern: FeedbackPattern?
        /// Silence the detect beep first (the first tap on a reader, with `nfc.silenceDetectBeep`).
        var silence: Bool
    }

    /// The jobs, done in order on the feedback thread.
    private let queue = JobQueue<Job>()
    private let tally = Mutex(NFCFeedbackCounters())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    var counters: NFCFeedbackCounters { tally.withLock { $0 } }

    /// Starts the feedback thread (with the source; once).
    func start() {
        queue.start(name: "nfc-feedback") { [self] in run() }
    }

    /// Queues a job for the thread (dropped once stopping: the service is going away).
    func enqueue(_ job: Job) {
        queue.enqueue(job)
    }

    /// Ends the thread after the job in progress (queued jobs are dropped: the service is stopping); waits until
    /// `deadline` at most (an ACR122U answers its LED command only when the blinking is over, up to 2 s).
    func stop(deadline: Double) {
        queue.stop(deadline: deadline)
    }

    private func run() {
        var context: PCSCContext?
        var runners: [String: FeedbackRunner] = [:]
        defer { context?.release() }
        while let job = queue.next() {
            if context == nil { context = try? PCSCContext.establish() }
            guard let live = context else {
                count(job, .refused("pcscd not reachable for feedback"))
                continue
            }
            var runner = runners[job.reader] ?? FeedbackRunner()
            var channel = PCSCControlChannel(context: live, reader: job.reader) { [queue] seconds in
                _ = queue.pause(seconds)
            }
            if job.silence {
                let delivery = runner.silenceDetectBeep(profile: job.profile, channel: &channel)
                noteSilence(job, delivery)
            }
            if let pattern = job.pattern {
                count(job, runner.send(pattern, profile: job.profile, channel: &channel))
            }
            channel.close()
            runners[job.reader] = runner
            if channel.contextLost {
                context?.release()
                context = nil
            }
        }
    }

    private func count(_ job: Job, _ delivery: FeedbackDelivery) {
        tally.withLock { counters in
            switch delivery {
            case .sent: counters.sent += 1
            case .skipped: break
            case .tagGone: counters.tagGone += 1
            case .refused(let reason):
                counters.refused += 1
                counters.lastProblem = "\(job.reader): \(reason)"
            }
        }
        switch delivery {
        case .tagGone:
            logger.debug("NFC feedback not shown: the tag had left", [("reader", job.reader)])
        case .refused(let reason):
            logger.debug("NFC feedback refused", [("reader", job.reader), ("error", reason)])
        case .sent, .skipped:
            break
        }
    }

    /// One line per reader (the monitor asks once per reader per run).
    private func noteSilence(_ job: Job, _ delivery: FeedbackDelivery) {
        switch delivery {
        case .sent, .skipped:
            tally.withLock { $0.detectBeepSilenced += 1 }
            logger.info(
                delivery == .sent ? "NFC reader detect beep turned off" : "NFC reader detect beep already off",
                [("reader", job.reader), ("profile", job.profile.rawValue)])
        case .tagGone:
            logger.warn(
                "NFC reader detect beep not turned off: the tag left first (asked again when the reader is re-attached)",
                [("reader", job.reader)])
        case .refused(let reason):
            logger.warn(
                "NFC reader detect beep not turned off: the reader refused",
                [("reader", job.reader), ("error", reason)])
        }
    }
}

/// `ReaderControlChannel` over PC/SC: a shared connection to the card for pseudo-APDUs, a direct connection to
/// the reader for escapes, each opened on first use and closed by `close()`.
struct PCSCControlChannel: ReaderControlChannel {
    let context: PCSCContext
    let reader: String
    private var card: PCSCCard?
    private var direct: PCSCCard?
    /// pcscd went away during a command: the owner drops the context.
    private(set) var contextLost = false
    /// Waits the given seconds on the monotonic clock, or less when the feedback is stopping.
    private let wait: @Sendable (Double) -> Void

    init(context: PCSCContext, reader: String, wait: @escaping @Sendable (Double) -> Void) {
        self.context = context
        self.reader = reader
        self.wait = wait
    }

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        do throws(PCSCError) {
            let connected: PCSCCard
            if let card {
                connected = card
            } else {
                connected = try context.connect(reader: reader)
                card = connected
            }
            return try connected.transmit(apdu)
        } catch {
            throw map(error)
        }
    }

    mutating func control(code: UInt32, _ command: [UInt8]) throws(CardTransportError) -> [UInt8] {
        do throws(PCSCError) {
            let connected: PCSCCard
            if let direct {
                connected = direct
            } else {
                connected = try context.connect(reader: reader, direct: true)
                direct = connected
            }
            return try connected.control(code: code, command)
        } catch {
            throw map(error)
        }
    }

    func pause(milliseconds: Int) { wait(Double(milliseconds) / 1000) }

    mutating func close() {
        card?.disconnect()
        direct?.disconnect()
        card = nil
        direct = nil
    }

    private mutating func map(_ error: PCSCError) -> CardTransportError {
        if error.isCardGone { return .cardRemoved }
        if [SCARD_E_NO_SERVICE, SCARD_E_SERVICE_STOPPED, SCARD_F_COMM_ERROR, SCARD_E_INVALID_HANDLE].contains(
            error.code)
        {
            contextLost = true
        }
        return .failed(error.description)
    }
}
