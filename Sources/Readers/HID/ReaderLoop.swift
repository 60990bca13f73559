import BridgeCore
import Glibc
import Logging
import Platform

/// What `HIDSource` and its reader thread share: the commands the source queues, the stop flag, the wake pipe
/// that interrupts the thread's `poll()`, and the status the thread publishes for `summary`.
final class ReaderControl: Sendable {
    enum Command: Sendable {
        /// A descriptor handed in by `HIDSource.attach`; the loop adopts it when it takes the command.
        case attach(fd: Int32, identity: ScannerIdentity)
        case open(InputDeviceInfo, ScannerIdentity)
    }

    /// What `summary` shows, published by the reader thread.
    struct Status: Sendable {
        var scanners: [(name: String, devnode: String, grabbed: Bool)] = []
        var note: String?
    }

    private struct State: Sendable {
        var commands: [Command] = []
        var stopping = false
        var started = false
    }

    private let state = Mutex(State())
    let status = Mutex(Status())
    /// Told after `status` changed (`SourceContext.stateChanged`).
    let stateChanged: @Sendable () -> Void

    init(stateChanged: @escaping @Sendable () -> Void = {}) { self.stateChanged = stateChanged }
    /// Nil when no pipe could be made: stop() still works, the loop then polls with a 200 ms timeout.
    let wakePipe = WakePipe()

    /// True the first time only: the caller starts the thread.
    func markStarted() -> Bool {
        state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
    }

    /// Asks the thread to stop; true when it was running (the caller then waits for it).
    func requestStop() -> Bool {
        let running = state.withLock { state -> Bool in
            let running = state.started && !state.stopping
            state.stopping = true
            return running
        }
        if running { wakePipe?.signal() }
        return running
    }

    var isStopping: Bool { state.withLock { $0.stopping } }

    func post(_ command: Command) {
        state.withLock { $0.commands.append(command) }
        wakePipe?.signal()
    }

    func takeCommands() -> [Command] {
        state.withLock { state in
            defer { state.commands.removeAll() }
            return state.commands
        }
    }
}

/// The reader thread's loop: one `poll()` on every scanner fd, the udev monitor fd and the wake pipe. Its
/// timeout is the nearest inter-key deadline of any decoder (so half lines expire without further input) or a
/// pending open retry; otherwise it sleeps until something happens: no busy polling. Used on that thread only.
final class ReaderLoop {
    private let control: ReaderControl
    private let logger: Logger
    private let useUdev: Bool
    private let reader: ScannerReader
    private let discovery: ScannerDiscovery

    init(
        control: ReaderControl, config: BridgeConfig.HID, logger: Logger, useUdev: Bool,
        passThrough: PassThroughHandOff? = nil, submit: @escaping @Sendable (Read) -> Void
    ) {
        self.control = control
        self.logger = logger
        self.useUdev = useUdev
        reader = ScannerReader(logger: logger, grab: config.grab, passThrough: passThrough, submit: submit)
        discovery = ScannerDiscovery(config: config, logger: logger, reader: reader)
    }

    /// Runs until `control` says stop; `ready` is called once the scanners present at the start are attached.
    func run(ready: () -> Void) {
        defer {
            reader.detachAll(why: "stopping")
            // Descriptors handed in after the last round are the source's to close.
            for case .attach(let fd, _) in control.takeCommands() { _ = FileDescriptor(adopting: fd) }
            publish()
        }
        if useUdev { discovery.startUdev() }
        processCommands()
        publish()
        ready()

        let wakeFD = control.wakePipe?.readFD
        var fds: [pollfd] = []
        while !control.isStopping {
            fds.removeAll(keepingCapacity: true)
            if let wakeFD { fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)) }
            let monitorFD = discovery.monitorFD
            if let monitorFD { fds.append(pollfd(fd: monitorFD, events: Int16(POLLIN), revents: 0)) }
            for fd in reader.scanners.keys { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }

            let timeout = pollTimeout()
            do {
                // Waiting for a key, a device or a stop: the watchdog does not count it as work.
                try systemCall("poll") {
                    WorkerActivity.waiting {
                        fds.withUnsafeMutableBufferPointer { buffer in
                            Glibc.poll(buffer.baseAddress, nfds_t(buffer.count), timeout)
                        }
                    }
                }
            } catch {
                logger.error("poll failed", [("error", error.description)])
                // Never spin on a persistent poll error (ENOMEM): pause, then rebuild the set.
                MonotonicClock.sleep(seconds: 0.1)
                continue
            }
            var changed = false
            for entry in fds where entry.revents != 0 {
                if entry.fd == wakeFD {
                    control.wakePipe?.drain()
                } else if entry.fd == monitorFD {
                    changed = discovery.monitorReady(revents: entry.revents) || changed
                } else if entry.revents & Int16(POLLNVAL) != 0 {
                    reader.detach(fd: entry.fd, why: "fd closed")
                    changed = true
                } else if !reader.drain(fd: entry.fd, hangUp: entry.revents & Int16(POLLHUP | POLLERR) != 0) {
                    changed = true
                }
            }
            if processCommands() { changed = true }
            if discovery.retryOpens(now: MonotonicClock.now()) { changed = true }
            reader.tick(now: MonotonicClock.now())
            if changed { publish() }
        }
    }

    /// Milliseconds until the nearest decoder deadline or open retry; -1 (poll's "wait forever") when none.
    private func pollTimeout() -> Int32 {
        let deadline = [reader.nearestDeadline(), discovery.nextRetry].compactMap { $0 }.min()
        guard let deadline else { return control.wakePipe != nil ? -1 : 200 }
        let milliseconds = ((deadline - MonotonicClock.now()) * 1000).rounded(.up)
        return Int32(max(0, min(milliseconds, 60_000)))
    }

    @discardableResult
    private func processCommands() -> Bool {
        let commands = control.takeCommands()
        for command in commands {
            switch command {
            case .attach(let fd, let identity):
                reader.attach(FileDescriptor(adopting: fd), identity: identity)
            case .open(let device, let identity):
                discovery.open(device, identity: identity, now: MonotonicClock.now())
            }
        }
        return !commands.isEmpty
    }

    private func publish() {
        let list = reader.scanners.values
            .map { (name: $0.identity.name, devnode: $0.identity.devnode, grabbed: $0.grabbed) }
            .sorted { $0.devnode < $1.devnode }
        control.status.withLock { $0.scanners = list }
        control.stateChanged()
    }
}
