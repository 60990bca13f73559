import BridgeCore
import CPCSCLite
import Foundation
import Logging
import Platform
import Udev

/// The loop on `NFCSource`'s thread: context lifecycle, reader list, the blocking wait, and the reads.
///
/// State lives in this struct and is touched by that one thread only; what it shares with the rest of the
/// source (the stop flag, the context handle, the summary, the feedback queue, the hand-off of reads) comes in
/// one `ReaderMonitorContext`.
struct ReaderMonitor {
    /// What the monitor remembers about one reader between waits.
    struct Track {
        /// The last `dwEventState` (without CHANGED), fed back as `dwCurrentState`.
        var current: UInt = 0
        /// The event counter of the card last handled (read, or refused) on this reader.
        var handled: UInt?
        /// A card was on the reader, already handled, when the context was lost. pcscd's counters restart with
        /// pcscd, so after reconnecting the first sight of a present card is taken as that same card.
        var skipPresentOnce = false
        /// FAST_READ worked on this reader at least once: a later failure falls back for that read only.
        var fastReadWorked = false
        /// The reader refused the pass-through, or it failed before ever working: READ BINARY from now on.
        var fastReadOff = false
        /// The firmware version was asked for (once per reader while it stays attached), and its answer.
        var firmwareAsked = false
        var firmware: String?
        /// The detect beep was asked to be silenced (once per reader while it stays attached).
        var silenceRequested = false
    }

    let context: ReaderMonitorContext
    private var pcsc: PCSCContext?
    private var tracks: [String: Track] = [:]
    /// The PnP pseudo-reader's last state (its upper 16 bits hold pcscd's reader count).
    private var plugAndPlay: UInt = 0
    /// Consecutive failures to establish or keep a context: drives the back-off.
    private var failures = 0
    /// Consecutive "reader vanished" wait errors: a short pause when they repeat.
    private var readerErrors = 0
    /// A "pcscd is away" line was logged and no "pcscd connected" since: log nothing more until it is back.
    private var announcedDown = false
    private var lastLoss: (code: Int, time: Double)?
    private var knownReaders: [String]?
    /// Where each reader is plugged in (`ReaderIdentity`), asked once when it appears; forgotten when it leaves or
    /// pcscd restarts (which may give its name to another reader).
    private var identities: [String: ReaderIdentity] = [:]
    /// This thread's udev context, for `identities`; nil when udev is not there.
    private lazy var udev: UdevContext? = try? UdevContext()

    init(context: ReaderMonitorContext) {
        self.context = context
    }

    private var logger: Logger { context.logger }
    private var control: NFCControl { context.control }

    mutating func run() {
        defer { dropContext() }
        while !control.isStopping {
            if let pcsc {
                step(pcsc)
            } else {
                connect()
            }
        }
    }

    // MARK: context lifecycle

    /// Back-off before the next establish: 0 after a clean run, then 0.1, 0.2, 0.4, 0.8, 1 s while pcscd may be
    /// restarting. After that pcscd is away for good (not installed, stopped): the waits grow to
    /// `longestPcscdWait`, and pcscd's socket appearing ends a wait at once (inotify on its directory), so a tap
    /// right after pcscd comes back is not missed and an idle gate without pcscd is not woken every second.
    private var backoff: Double {
        switch failures {
        case 0: return 0
        case 1...5: return min(1.0, 0.1 * Double(1 << (failures - 1)))
        default: return min(ReaderMonitor.longestPcscdWait, Double(1 << min(failures - 5, 6)))
        }
    }

    /// The longest wait between two attempts to reach an absent pcscd (its socket appearing ends it sooner).
    static let longestPcscdWait: Double = 60

    /// The directory pcscd's socket appears in: `PCSCLITE_CSOCK_NAME`'s (libpcsclite's own override), else
    /// `/run/pcscd`; its parent while it does not exist (pcscd makes it at start).
    static func socketDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let socket = environment["PCSCLITE_CSOCK_NAME"] ?? "/run/pcscd/pcscd.comm"
        let directory = (socket as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue {
            return directory
        }
        return (directory as NSString).deletingLastPathComponent
    }

    private mutating func connect() {
        if backoff > 0 {
            // Watched only once the short waits are over: before, a plain sleep is as good.
            let watch = failures > 5 ? DirectoryWatch(ReaderMonitor.socketDirectory()) : nil
            control.pause(backoff, watching: watch)
            if control.isStopping { return }
        }
        do {
            let fresh = try PCSCContext.establish()
            guard control.publish(contextHandle: fresh.handle) else {
                fresh.release()
                return
            }
            pcsc = fresh
            plugAndPlay = 0
            knownReaders = nil
            if announcedDown {
                announcedDown = false
                logger.info("pcscd connected: watching readers again")
            }
        } catch {
            failures += 1
            setState(SourceState("pcscd not running: waiting", up: false))
            if !announcedDown {
                announcedDown = true
                logger.warn(
                    "pcscd not running: waiting for it (no NFC reads until it is back)",
                    [("error", error.description)])
            }
        }
    }

    /// Forgets the context after pcscd went away (or the context broke) and arranges a reconnect.
    private mutating func lose(_ error: PCSCError) {
        let now = MonotonicClock.now()
        // A context that breaks again and again for the same reason logs once a minute, not once a second.
        let repeated = lastLoss.map { $0.code == error.code && now - $0.time < 60 } ?? false
        if !announcedDown && !repeated {
            logger.warn("lost the pcscd connection: reconnecting", [("error", error.description)])
            lastLoss = (error.code, now)
        }
        announcedDown = announcedDown || !repeated
        failures += 1
        identities = [:]
        setState(SourceState("pcscd connection lost: reconnecting", up: false))
        for name in Array(tracks.keys) {
            guard var track = tracks[name] else { continue }
            track.skipPresentOnce = track.current & ReaderFlags.present != 0 && track.handled != nil
            track.handled = nil
            track.current = 0
            tracks[name] = track
        }
        dropContext()
    }

    private mutating func dropContext() {
        control.publish(contextHandle: nil)
        pcsc?.release()
        pcsc = nil
    }

    // MARK: one wait

    private mutating func step(_ pcsc: PCSCContext) {
        let all: [String]
        do {
            all = try pcsc.listReaders()
        } catch {
            lose(error)
            return
        }
        let readers = all.filter(context.selects)
        noteReaders(readers, all: all, pcsc: pcsc)

        var states = readers.map { ReaderStatus(name: $0, current: tracks[$0]?.current ?? 0) }
        states.append(ReaderStatus(name: PCSCContext.plugAndPlay, current: plugAndPlay))
        do {
            try pcsc.getStatusChange(&states, timeout: PCSCContext.infinite)
        } catch {
            switch error.code {
            case SCARD_E_CANCELLED, SCARD_E_TIMEOUT:
                return
            case SCARD_E_UNKNOWN_READER, SCARD_E_READER_UNAVAILABLE:
                // A reader left between the list and the wait: re-list. Pause if it keeps happening.
                readerErrors += 1
                if readerErrors > 1 { control.pause(0.2) }
                return
            default:
                lose(error)
                return
            }
        }
        readerErrors = 0
        failures = 0
        let detectedAt = Date()
        let detected = MonotonicClock.now()
        plugAndPlay = states[states.count - 1].event & ~ReaderFlags.changed
        for status in states.dropLast() {
            handle(status, pcsc: pcsc, detectedAt: detectedAt, detected: detected)
        }
    }

    /// Logs reader changes (one line each time the set changes) and updates the summary; asks each new reader
    /// where it is plugged in.
    private mutating func noteReaders(_ readers: [String], all: [String], pcsc: PCSCContext) {
        tracks = tracks.filter { readers.contains($0.key) }
        identities = identities.filter { readers.contains($0.key) }
        for reader in readers where identities[reader] == nil {
            let identity = ReaderIdentity.of(reader: reader, context: pcsc, udev: udev)
            identities[reader] = identity
            logger.info(
                "NFC reader found",
                [
                    ("reader", reader), ("device", deviceName(reader)), ("path", identity.path ?? "unknown"),
                    ("serial", identity.serial ?? "none"),
                ] + (identity.note.map { [("note", $0)] } ?? []))
        }
        // `status` and the bench page show this line: each reader's name, and its PC/SC name and USB port when the
        // name is the operator's.
        let shown = readers.map { reader -> String in
            let name = deviceName(reader)
            guard name != reader else { return reader }
            return "\(name) (\(reader)" + (identities[reader]?.path.map { " at \($0)" } ?? "") + ")"
        }
        let summary: String
        switch readers.count {
        case 0 where all.isEmpty: summary = "no readers"
        case 0: summary = "no reader matches nfc.readers (\(all.count) present: \(all.joined(separator: ", ")))"
        case 1: summary = "1 reader: \(shown[0])"
        default: summary = "\(readers.count) readers: \(shown.joined(separator: ", "))"
        }
        setState(SourceState(summary, up: !readers.isEmpty))
        if knownReaders != readers {
            knownReaders = readers
            logger.info("NFC readers: \(summary)", [("readers", String(readers.count))])
        }
    }

    /// The name reads from `reader` carry: its `nfc.names` name, else its PC/SC name.
    private func deviceName(_ reader: String) -> String {
        context.config.name(of: reader, identity: identities[reader])
    }

    private mutating func handle(_ status: ReaderStatus, pcsc: PCSCContext, detectedAt: Date, detected: Double) {
        var track = tracks[status.name] ?? Track()
        defer { tracks[status.name] = track }
        track.current = status.event & ~ReaderFlags.changed
        let flags = status.flags
        guard flags & (ReaderFlags.unknown | ReaderFlags.unavailable) == 0 else { return }
        guard flags & ReaderFlags.present != 0 else {
            track.skipPresentOnce = false
            return
        }
        guard track.handled != status.counter else { return }
        track.handled = status.counter
        if track.skipPresentOnce {
            track.skipPresentOnce = false
            logger.debug(
                "card still on the reader since before pcscd restarted: not read again",
                [("reader", status.name)])
            return
        }
        if flags & ReaderFlags.mute != 0 {
            logger.warn(
                "card on the reader does not answer (mute): ignored; tap again",
                [("reader", status.name), ("atr", NFCHex.bytes(status.atr, separator: ""))])
            return
        }
        read(status, pcsc: pcsc, detectedAt: detectedAt, detected: detected, track: &track)
    }

    // MARK: one tap

    private func read(
        _ status: ReaderStatus, pcsc: PCSCContext, detectedAt: Date, detected: Double, track: inout Track
    ) {
        let kind = TagKind.from(atr: status.atr)
        let profile = context.profile(for: status.name)
        var event = NFCTapEvent(
            reader: status.name, atr: status.atr, kind: kind, detectedAt: detectedAt, detectedMonotonic: detected,
            finishedMonotonic: detected, connectSeconds: 0, readSeconds: 0, transmitSeconds: 0, apduCount: 0)
        event.profile = profile
        event.device = deviceName(status.name)
        event.identity = identities[status.name]
        let silence = context.config.silenceDetectBeep && profile.canSilenceDetectBeep && !track.silenceRequested
        track.silenceRequested = track.silenceRequested || silence
        let feedback = Feedback(
            config: context.config.feedback, queue: context.feedback, reader: status.name, profile: profile,
            silence: silence)
        let connectStart = MonotonicClock.now()
        let card: PCSCCard
        do {
            card = try pcsc.connect(reader: status.name)
        } catch {
            let finished = MonotonicClock.now()
            event.connectSeconds = finished - connectStart
            event.finishedMonotonic = finished
            event.error =
                error.isCardGone
                ? "card left before it could be read (\(error.description))"
                : "cannot connect to the card: \(error.description)"
            fail(event)
            feedback.send(.failed)
            return
        }
        let readStart = MonotonicClock.now()
        event.connectSeconds = readStart - connectStart
        var transport = PCSCTransport(card: card)
        var options = TagReadOptions(fastRead: track.fastReadOff ? nil : profile.fastRead)
        options.readSignature = context.config.checkOriginality
        options.readsISO15693 = profile.readsISO15693
        let outcome: Result<TagReadResult, TagReadError>
        do {
            outcome = .success(try TagReader.read(kind: kind, transport: &transport, options: options))
        } catch {
            outcome = .failure(error)
        }
        let finished = MonotonicClock.now()
        // Disconnect after the submit: it is one more round trip to pcscd that the read does not wait for.
        defer { card.disconnect() }
        event.readSeconds = finished - readStart
        event.finishedMonotonic = finished
        event.transmitSeconds = transport.transmitSeconds
        event.apduCount = transport.count
        switch outcome {
        case .success(let result):
            let genuine =
                context.config.checkOriginality
                ? OriginalitySignature.check(uid: result.uid, signature: result.signature, product: result.product)
                : nil
            let read = handoff.makeRead(
                device: deviceName(status.name), result: result, detectedAt: detectedAt, genuine: genuine)
            event.result = result
            event.read = read
            logger.debug(
                "NFC tag read",
                [
                    ("reader", status.name), ("uid", read.uid ?? ""), ("kind", kind.code),
                    ("apdus", String(result.apduCount)),
                ])
            note(result.fastRead, reader: status.name, track: &track)
            // Feedback goes to its own thread once the read is committed: neither the commit nor the next read
            // waits for it.
            handoff.deliver(read) { outcome in feedback.send(outcome) }
            if handoff.askFirmware, !track.firmwareAsked {
                // After the read is handed on, while the card is still there (the ACR122U answers its version
                // command only then): one more exchange, once per reader, for `test-read`.
                track.firmwareAsked = true
                var channel = PCSCControlChannel(context: pcsc, reader: status.name, wait: { _ in })
                track.firmware = ReaderFirmware.query(profile: profile, channel: &channel)
                channel.close()
            }
            event.firmware = track.firmware
            handoff.report(event)
        case .failure(let error):
            event.error = error.description
            fail(event)
            feedback.send(.failed)
        }
    }

    /// Remembers per reader what the fast read did: once refused (or failing before it ever worked), the
    /// reader is read with READ BINARY until it is re-attached.
    private func note(_ use: FastReadUse, reader: String, track: inout Track) {
        switch use {
        case .notTried: break
        case .used: track.fastReadWorked = true
        case .fellBack(let reason, let refused):
            guard refused || !track.fastReadWorked else {
                logger.debug("NFC fast read fell back to READ BINARY", [("reader", reader), ("error", reason)])
                return
            }
            track.fastReadOff = true
            logger.info(
                "NFC fast read not available on this reader: READ BINARY from now on",
                [("reader", reader), ("error", reason)])
        }
    }

    /// Queues the feedback for one tap on the feedback thread.
    struct Feedback: Sendable {
        /// `nfc.feedback`.
        let config: BridgeConfig.NFC.Feedback
        let queue: NFCFeedback
        let reader: String
        let profile: ReaderProfile
        let silence: Bool

        func send(_ outcome: FeedbackOutcome) {
            let pattern = config.enabled && profile.feedback != nil ? config.pattern(for: outcome) : nil
            guard pattern.map({ !$0.isOff }) ?? false || silence else { return }
            queue.enqueue(
                NFCFeedback.Job(reader: reader, profile: profile, pattern: pattern, silence: silence))
        }
    }

    /// One clear line per failed tap; nothing is submitted and nothing is retried until the next tap.
    private func fail(_ event: NFCTapEvent) {
        logger.warn(
            "NFC read failed: nothing recorded; tap again",
            [("reader", event.reader), ("kind", event.kind.code), ("error", event.error ?? "unknown")])
        handoff.report(event)
    }

    private var handoff: TapHandoff { context.handoff }

    private func setState(_ state: SourceState) { control.sourceState = state }
}
