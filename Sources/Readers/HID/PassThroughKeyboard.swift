import BridgeCore
import CEvdevShim
import Glibc
import Logging
import Platform

/// Where a scanned line goes when `hid.passThrough` is on: to the pipeline, and once it is committed (the bridge
/// first, then the desktop) its keys to the virtual keyboard when the mode re-types its kind of code. A code is a
/// Plings URL by the same parser the pipeline uses.
struct PassThroughHandOff: Sendable {
    let mode: PassThrough
    let parser: PlingsURLParser
    let commit: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    let keyboard: PassThroughKeyboard

    func hand(_ read: Read, keys: [InputEvent]) {
        let recognized: Bool
        if case .success = parser.parse(read.raw) { recognized = true } else { recognized = false }
        let retype = mode.retypes(recognized: recognized)
        let keyboard = self.keyboard
        commit(read) { _ in
            if retype { keyboard.type(keys) }
        }
    }
}

/// The virtual keyboard `hid.passThrough` re-types codes on, so a grabbed scanner still serves the desktop's other
/// programs (a shipping application beside Plings). Made with `/dev/uinput` (the kernel's uinput.rst) when the
/// source starts and named `plings-bridge pass-through`; the bridge never takes it as a scanner
/// (`ScannerMatcher`). A code's keys are written on a thread of its own, after the code was committed, with the
/// gaps the scanner typed them with (never longer than `longestGap`), so neither the reads nor the commits wait.
final class PassThroughKeyboard: Sendable {
    /// The name the virtual keyboard carries (`/proc/bus/input/devices`, evdev's EVIOCGNAME).
    static let deviceName = "plings-bridge pass-through"
    /// The longest pause between two re-typed keys: at the scanner's pace or faster.
    static let longestGap = 0.008

    private let queue = JobQueue<[InputEvent]>()
    private let logger: Logger
    private let path: String
    private let device = Mutex<Int32?>(nil)

    init(logger: Logger, path: String = "/dev/uinput") {
        self.logger = logger
        self.path = path
    }

    /// Creates the virtual keyboard and its thread. Without `/dev/uinput` (no module, no permission) one line
    /// says so and codes go to plings-bridge only: the reads never depend on it.
    func start() {
        let fd = plings_uinput_create(path, Self.deviceName, 0, 0)
        guard fd >= 0 else {
            logger.error(
                "hid.passThrough is on but the virtual keyboard cannot be made: codes go to plings-bridge only",
                [("device", path), ("error", String(cString: strerror(-fd))), ("fix", Self.fix(errno: -fd))])
            return
        }
        device.withLock { $0 = fd }
        logger.info("pass-through keyboard ready", [("device", Self.deviceName)])
        queue.start(name: "hid-pass-through") { [self] in
            while let events = queue.next() { type(events, on: fd) }
        }
    }

    /// What to do about `errno` from `/dev/uinput` (docs/operations.md, "Pass-through").
    static func fix(errno: Int32) -> String {
        errno == ENOENT || errno == ENODEV
            ? "load the uinput module (modprobe uinput; /etc/modules-load.d/plings-bridge-uinput.conf)"
            : "let the service write /dev/uinput: the udev rule and unit drop-in of docs/operations.md, Pass-through"
    }

    /// Queues one code's keys (dropped when there is no virtual keyboard or the source is stopping).
    func type(_ events: [InputEvent]) {
        guard device.withLock({ $0 }) != nil else { return }
        queue.enqueue(events)
    }

    /// Ends the thread after the code being typed (codes still queued are dropped: the source is going away),
    /// by `deadline`, then removes the virtual keyboard.
    func stop(deadline: Double) {
        if queue.stop(deadline: deadline), let fd = device.withLock({ $0 }) {
            plings_uinput_destroy(fd)
            device.withLock { $0 = nil }
        }
    }

    private func type(_ events: [InputEvent], on fd: Int32) {
        var previous: Double?
        var record: [UInt8] = []
        record.reserveCapacity(2 * InputEvent.size)
        for event in events {
            if let previous {
                let gap = min(max(event.time - previous, 0), Self.longestGap)
                if gap > 0, queue.pause(gap) { return }
            }
            previous = event.time
            record.removeAll(keepingCapacity: true)
            InputEvent(type: Evdev.EV_KEY, code: event.code, value: event.value).encode(into: &record)
            InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0).encode(into: &record)
            let written = record.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written == record.count else {
                logger.warn(
                    "pass-through keyboard refused a key: the rest of this code is not typed",
                    [("error", String(cString: strerror(errno)))])
                return
            }
        }
    }
}
