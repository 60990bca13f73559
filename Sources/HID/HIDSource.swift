import BridgeCore
import CEvdevShim
import Foundation
import Glibc
import Logging
import Platform

/// The USB HID scanner source: finds scanners through udev, follows hot-plug, grabs each one, decodes its
/// keystrokes and submits every completed line as a `Read` (`source.kind = hid`, device = stable name).
///
/// One thread blocks in `poll()` on every scanner fd, the udev monitor fd and a wake pipe; its timeout is
/// the nearest inter-key deadline of any decoder (so half lines expire without further input) or a pending
/// open retry, otherwise it sleeps until something happens: no busy polling. Each scanner has its own
/// decoder, so two scanners typing at once never interleave. Debouncing is the pipeline's job.
public final class HIDSource: Sendable {
    private enum Command: Sendable {
        case attach(fd: Int32, identity: ScannerIdentity)
        case open(InputDeviceInfo, ScannerIdentity)
    }

    private struct Control: Sendable {
        var commands: [Command] = []
        var stopping = false
        var started = false
    }

    /// What `summary` shows, published by the reader thread.
    private struct Status: Sendable {
        var scanners: [(name: String, devnode: String, grabbed: Bool)] = []
        var note: String?
    }

    private let config: BridgeConfig.HID
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    /// False only in tests that feed pipes through `attach(fd:...)` without udev.
    private let useUdev: Bool
    private let control = Mutex(Control())
    private let status = Mutex(Status())
    /// Wake pipe: [read end, write end]; a byte written wakes the loop for commands and stop.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// How long to keep retrying an open that fails with EACCES/ENOENT (udev may apply the rule's group and
    /// mode just after the add event), and how often.
    static let openRetryWindow = 3.0
    static let openRetryInterval = 0.1

    public init(config: BridgeConfig.HID, logger: Logger, submit: @escaping @Sendable (Read) -> Void) {
        self.config = config
        self.logger = logger
        self.submit = submit
        self.useUdev = true
        (wakeRead, wakeWrite) = Self.makeWakePipe()
    }

    /// A source that may skip udev: with `udev: false` scanners come only from `attach(fd:name:layout:)`
    /// (unit tests and `plings-bench hid` feed pipes carrying raw `input_event` records).
    public init(config: BridgeConfig.HID, logger: Logger, udev: Bool, submit: @escaping @Sendable (Read) -> Void) {
        self.config = config
        self.logger = logger
        self.submit = submit
        self.useUdev = udev
        (wakeRead, wakeWrite) = Self.makeWakePipe()
    }

    deinit {
        EvdevNode.close(wakeRead)
        EvdevNode.close(wakeWrite)
    }

    private static func makeWakePipe() -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        // Without a wake pipe stop() still works: the loop then polls with a 200 ms timeout. Close-on-exec is set
        // atomically at creation (a process spawned by another thread in between must not inherit the pipe).
        guard plings_wake_pipe(&fds) == 0 else { return (-1, -1) }
        return (fds[0], fds[1])
    }

    /// Starts the reader thread and waits (at most 2 s) until the scanners present now are attached, so
    /// `summary` is meaningful right after. Does nothing when `hid.enabled` is false or already started.
    public func start() {
        guard config.enabled else {
            status.withLock { $0.note = "disabled (hid.enabled is false)" }
            return
        }
        let first = control.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started
        }
        guard first else { return }
        let thread = Thread { [self] in self.loop() }
        thread.name = "hid-reader"
        thread.start()
        _ = ready.wait(timeout: .now() + 2)
    }

    /// Stops the reader thread, releasing every grab and closing every node; returns within 1 s.
    public func stop() {
        let running = control.withLock { state -> Bool in
            let running = state.started && !state.stopping
            state.stopping = true
            return running
        }
        guard running else { return }
        wake()
        if finished.wait(timeout: .now() + 0.9) == .timedOut {
            logger.warn("hid reader did not stop within 1 s")
        }
    }

    /// One line for the startup log and status: which scanners are read, or that none is there yet.
    public var summary: String {
        status.withLock { state in
            if let note = state.note { return note }
            if state.scanners.isEmpty { return "no scanners found: waiting for one to be plugged in" }
            let list = state.scanners.map { "\($0.name) (\($0.devnode)\($0.grabbed ? ", grabbed" : ""))" }
            return "\(state.scanners.count) scanner\(state.scanners.count == 1 ? "" : "s"): "
                + list.joined(separator: ", ")
        }
    }

    /// Reads an already open fd as a scanner named `name` (a pipe, FIFO or evdev node carrying raw
    /// `input_event` records), with `layout` or the configured one. The source owns (and closes) the fd.
    public func attach(fd: Int32, name: String, layout: KeyboardLayout? = nil) {
        var decoder = decoderConfiguration(layoutName: nil, variant: nil)
        if let layout { decoder.layout = layout }
        let identity = ScannerIdentity(
            devnode: "fd:\(fd)", name: name, product: name, serial: nil, syspath: "", decoder: decoder)
        control.withLock { $0.commands.append(.attach(fd: fd, identity: identity)) }
        wake()
    }

    /// Opens `devnode` as a scanner named `name` the way a udev add does, EACCES/ENOENT retries included
    /// (tests: a FIFO that appears late).
    func open(devnode: String, name: String) {
        let device = InputDeviceInfo(devnode: devnode, syspath: devnode, name: name, tagged: true)
        let identity = ScannerIdentity(
            devnode: devnode, name: name, product: name, serial: nil, syspath: devnode,
            decoder: decoderConfiguration(layoutName: nil, variant: nil))
        control.withLock { $0.commands.append(.open(device, identity)) }
        wake()
    }

    private func wake() {
        guard wakeWrite >= 0 else { return }
        var byte: UInt8 = 1
        // EAGAIN means the pipe is full: a wake-up is pending already.
        _ = try? systemCall("write") { Glibc.write(wakeWrite, &byte, 1) }
    }

    /// The decoder settings for a scanner whose `hid.match` rule names `layoutName`/`variant` (nil: none).
    /// The layout was checked at load; should xkb still fail to compile it, the scanner decodes as `us` and
    /// the log says why.
    func decoderConfiguration(layoutName: String?, variant: String?) -> KeystrokeDecoder.Configuration {
        let (wanted, wantedVariant) = Self.layoutChoice(config, layoutName, variant)
        let layout: KeyboardLayout
        do {
            layout = try XKBLayouts.layout(wanted, variant: wantedVariant)
        } catch {
            logger.error(
                "cannot compile the keyboard layout: using us", [("layout", wanted), ("error", error.message)])
            layout = (try? XKBLayouts.layout("us")) ?? Self.emptyLayout
        }
        return KeystrokeDecoder.Configuration(
            layout: layout, suffix: config.suffix == .tab ? .tab : .enter, maxLineLength: config.maxLineLength,
            interKeyTimeout: config.interKeyTimeout)
    }

    // MARK: - The reader thread

    /// An open that failed with EACCES/ENOENT, retried until `giveUp`.
    private struct PendingOpen {
        var info: InputDeviceInfo
        var identity: ScannerIdentity
        var next: Double
        var giveUp: Double
        var lastError: SystemError?
    }

    private final class LoopState {
        let reader: ScannerReader
        var udev: Udev?
        var monitor: UdevMonitor?
        var pending: [PendingOpen] = []

        init(reader: ScannerReader) { self.reader = reader }
    }

    private func loop() {
        let state = LoopState(reader: ScannerReader(logger: logger, grab: config.grab, submit: submit))
        defer {
            state.reader.detachAll(why: "stopping")
            publish(state)
            finished.signal()
        }
        if useUdev { startUdev(state) }
        processCommands(state)
        publish(state)
        ready.signal()

        var fds: [pollfd] = []
        while !control.withLock({ $0.stopping }) {
            fds.removeAll(keepingCapacity: true)
            if wakeRead >= 0 { fds.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)) }
            let monitorFD = state.monitor?.fd ?? -1
            if monitorFD >= 0 { fds.append(pollfd(fd: monitorFD, events: Int16(POLLIN), revents: 0)) }
            for fd in state.reader.scanners.keys { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }

            let timeout = pollTimeout(state)
            do {
                try systemCall("poll") {
                    fds.withUnsafeMutableBufferPointer { buffer in
                        Glibc.poll(buffer.baseAddress, nfds_t(buffer.count), timeout)
                    }
                }
            } catch {
                logger.error("poll failed", [("error", error.description)])
                // Never spin on a persistent poll error (ENOMEM): pause, then rebuild the set.
                usleep(100_000)
                continue
            }
            var changed = false
            for entry in fds where entry.revents != 0 {
                if entry.fd == wakeRead {
                    drainWakePipe()
                } else if entry.fd == monitorFD {
                    if entry.revents & Int16(POLLERR | POLLNVAL) != 0 && entry.revents & Int16(POLLIN) == 0 {
                        // A broken monitor socket would wake poll() forever: drop it rather than spin.
                        logger.error("udev monitor failed: scanners plugged in from now on will not be seen")
                        state.monitor = nil
                    } else {
                        changed = handleHotplug(state) || changed
                    }
                } else if entry.revents & Int16(POLLNVAL) != 0 {
                    state.reader.detach(fd: entry.fd, why: "fd closed")
                    changed = true
                } else if !state.reader.drain(fd: entry.fd, hangUp: entry.revents & Int16(POLLHUP | POLLERR) != 0) {
                    changed = true
                }
            }
            if processCommands(state) { changed = true }
            if retryOpens(state, now: MonotonicClock.now()) { changed = true }
            state.reader.tick(now: MonotonicClock.now())
            if changed { publish(state) }
        }
    }

    /// Milliseconds until the nearest decoder deadline or open retry; -1 (wait forever) when none.
    private func pollTimeout(_ state: LoopState) -> Int32 {
        var deadline = state.reader.nearestDeadline()
        for open in state.pending where open.next < (deadline ?? .infinity) { deadline = open.next }
        guard let deadline else { return wakeRead >= 0 ? -1 : 200 }
        let milliseconds = ((deadline - MonotonicClock.now()) * 1000).rounded(.up)
        return Int32(max(0, min(milliseconds, 60_000)))
    }

    private func drainWakePipe() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while bytes.withUnsafeMutableBytes({ Glibc.read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
    }

    @discardableResult
    private func processCommands(_ state: LoopState) -> Bool {
        let commands = control.withLock { state -> [Command] in
            defer { state.commands.removeAll() }
            return state.commands
        }
        for command in commands {
            switch command {
            case .attach(let fd, let identity):
                state.reader.attach(fd: fd, identity: identity)
            case .open(let device, let identity):
                open(device, identity: identity, state: state, now: MonotonicClock.now())
            }
        }
        return !commands.isEmpty
    }

    private func startUdev(_ state: LoopState) {
        do {
            let udev = try Udev()
            state.udev = udev
            do {
                state.monitor = try udev.monitor()
            } catch {
                logger.warn(
                    "no udev monitor: scanners plugged in later will not be seen", [("error", error.description)])
            }
            let devices = udev.inputDevices()
            var scanners: [(InputDeviceInfo, ScannerMatcher.Verdict)] = []
            for device in devices where device.isKeyboard {
                let verdict = ScannerMatcher.verdict(for: device, rules: config.match)
                if verdict.matched {
                    scanners.append((device, verdict))
                } else {
                    logger.debug(
                        "keyboard is not a scanner", [("devnode", device.devnode), ("reason", verdict.reason)])
                }
            }
            let names = ScannerMatcher.stableNames(scanners.map(\.0))
            let now = MonotonicClock.now()
            for (device, verdict) in scanners {
                let name = names[device.devnode] ?? device.devnode
                logger.info(
                    "scanner found", [("device", name), ("devnode", device.devnode), ("reason", verdict.reason)])
                open(device, identity: identity(device, name: name, verdict: verdict), state: state, now: now)
            }
        } catch {
            logger.error("cannot use udev: no scanners will be found", [("error", error.description)])
        }
    }

    private func identity(_ device: InputDeviceInfo, name: String, verdict: ScannerMatcher.Verdict) -> ScannerIdentity {
        ScannerIdentity(
            devnode: device.devnode, name: name, product: device.name, serial: device.serial,
            syspath: device.syspath, decoder: decoderConfiguration(layoutName: verdict.layout, variant: verdict.variant)
        )
    }

    /// Opens and attaches, or queues a retry on EACCES/ENOENT (permissions or node not there yet).
    private func open(_ device: InputDeviceInfo, identity: ScannerIdentity, state: LoopState, now: Double) {
        do {
            let fd = try EvdevNode.open(device.devnode)
            state.reader.attach(fd: fd, identity: identity)
        } catch  where error.errno == EACCES || error.errno == ENOENT || error.errno == EPERM {
            if let index = state.pending.firstIndex(where: { $0.info.devnode == device.devnode }) {
                state.pending[index].lastError = error
                state.pending[index].next = now + Self.openRetryInterval
            } else {
                logger.debug(
                    "cannot open the scanner yet: retrying",
                    [("device", identity.name), ("devnode", device.devnode), ("error", error.description)])
                state.pending.append(
                    PendingOpen(
                        info: device, identity: identity, next: now + Self.openRetryInterval,
                        giveUp: now + Self.openRetryWindow, lastError: error))
            }
        } catch {
            logger.error(
                "cannot open the scanner",
                [("device", identity.name), ("devnode", device.devnode), ("error", error.description)])
        }
    }

    /// Retries due opens; returns true when one attached or was given up.
    private func retryOpens(_ state: LoopState, now: Double) -> Bool {
        guard !state.pending.isEmpty else { return false }
        var changed = false
        let due = state.pending.filter { $0.next <= now }
        for item in due {
            state.pending.removeAll { $0.info.devnode == item.info.devnode }
            if now >= item.giveUp {
                logger.error(
                    "cannot open the scanner: giving up",
                    [
                        ("device", item.identity.name), ("devnode", item.info.devnode),
                        ("error", item.lastError?.description ?? "unknown"),
                        ("fix", "install udev/70-plings-bridge.rules and add the service user to group plings"),
                    ])
                changed = true
                continue
            }
            let before = state.reader.scanners.count
            open(item.info, identity: item.identity, state: state, now: now)
            if let index = state.pending.firstIndex(where: { $0.info.devnode == item.info.devnode }) {
                state.pending[index].giveUp = item.giveUp
            }
            if state.reader.scanners.count != before { changed = true }
        }
        return changed
    }

    /// Handles monitor events; returns true when the scanner set changed.
    private func handleHotplug(_ state: LoopState) -> Bool {
        guard let monitor = state.monitor else { return false }
        var changed = false
        for event in monitor.receive() {
            switch event.action {
            case .add:
                guard let device = event.info, device.isKeyboard else { continue }
                let verdict = ScannerMatcher.verdict(for: device, rules: config.match)
                guard verdict.matched else {
                    logger.debug(
                        "keyboard plugged in is not a scanner",
                        [("devnode", device.devnode), ("reason", verdict.reason)])
                    continue
                }
                let open = state.reader.scanners.values
                guard !open.contains(where: { $0.identity.devnode == device.devnode }) else { continue }
                let serialTaken = open.contains { $0.identity.serial != nil && $0.identity.serial == device.serial }
                let name = ScannerMatcher.stableName(device, serialIsUnique: !serialTaken)
                logger.info(
                    "scanner plugged in", [("device", name), ("devnode", device.devnode), ("reason", verdict.reason)])
                let before = state.reader.scanners.count
                self.open(
                    device, identity: identity(device, name: name, verdict: verdict), state: state,
                    now: MonotonicClock.now()
                )
                if state.reader.scanners.count != before { changed = true }
            case .remove:
                state.pending.removeAll { $0.info.syspath == event.syspath }
                for scanner in state.reader.scanners.values
                where scanner.identity.syspath == event.syspath
                    || (event.devnode != nil && scanner.identity.devnode == event.devnode)
                {
                    state.reader.detach(fd: scanner.fd, why: "unplugged")
                    changed = true
                }
            case .other:
                continue
            }
        }
        return changed
    }

    private func publish(_ state: LoopState) {
        let list = state.reader.scanners.values
            .map { (name: $0.identity.name, devnode: $0.identity.devnode, grabbed: $0.grabbed) }
            .sorted { $0.devnode < $1.devnode }
        status.withLock { $0.scanners = list }
    }
}
