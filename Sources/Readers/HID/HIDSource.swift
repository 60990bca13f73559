import BridgeCore
import Foundation
import Logging
import Platform
import SourceKit

/// The USB HID scanner source: finds scanners through udev, follows hot-plug, grabs each one, decodes its
/// keystrokes and submits every completed line as a `Read` (`source.kind = hid`, device = stable name).
///
/// This type is the public face and the lifecycle: it starts and stops the reader thread and hands it work
/// through `ReaderControl`. The thread runs `ReaderLoop` (one `poll()` over every scanner, the udev monitor
/// and a wake pipe; see there), which finds scanners with `ScannerDiscovery` and decodes them with
/// `ScannerReader`. Each scanner has its own decoder, so two scanners typing at once never interleave.
/// Debouncing is the pipeline's job.
public final class HIDSource: ReadSource {
    public let kind = SourceKind.hid
    private let config: BridgeConfig.HID
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    /// False only in tests and `plings-bench hid`, which feed pipes through `attach(fd:...)` without udev.
    private let useUdev: Bool
    private let control: ReaderControl
    /// The reader thread: ready once the scanners present at start are attached.
    private let thread = ReaderThread(name: "hid-reader")
    /// With `hid.passThrough` on: where lines go (committed, then re-typed on the virtual keyboard).
    private let passThrough: PassThroughHandOff?

    /// A source that finds scanners through udev; with `udev: false` scanners come only from
    /// `attach(fd:name:layout:)` (unit tests and `plings-bench hid` feed pipes carrying raw `input_event`
    /// records). Nothing runs before `start()`.
    ///
    /// `commit` and `hosts` serve `hid.passThrough`: with it on, a line is committed and then, by what `hosts`
    /// make of it (a Plings URL or not), re-typed on the virtual keyboard at `uinput`.
    public init(
        config: BridgeConfig.HID, logger: Logger, udev: Bool = true, submit: @escaping @Sendable (Read) -> Void,
        commit: (@Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void)? = nil,
        hosts: [String] = ["s.plings.io"], uinput: String = "/dev/uinput",
        stateChanged: @escaping @Sendable () -> Void = {}
    ) {
        self.control = ReaderControl(stateChanged: stateChanged)
        self.config = config
        self.logger = logger
        self.submit = submit
        self.useUdev = udev
        if config.passThrough != .none {
            passThrough = PassThroughHandOff(
                mode: config.passThrough, parser: PlingsURLParser(hosts: hosts),
                commit: commit ?? { read, _ in submit(read) },
                keyboard: PassThroughKeyboard(logger: logger, path: uinput))
        } else {
            passThrough = nil
        }
    }

    /// Starts the reader thread and waits (at most 2 s) until the scanners present now are attached, so
    /// `summary` is meaningful right after. Does nothing when `hid.enabled` is false or already started.
    public func start() {
        guard config.enabled else {
            control.status.withLock { $0.note = "disabled (hid.enabled is false)" }
            return
        }
        guard control.markStarted() else { return }
        passThrough?.keyboard.start()
        thread.start(readyWithin: 2) { [self] ready in
            let loop = ReaderLoop(
                control: control, config: config, logger: logger, useUdev: useUdev, passThrough: passThrough,
                submit: submit)
            loop.run(ready: ready)
        }
    }

    /// Stops the reader thread, releasing every grab and closing every node; returns by `deadline` (the thread
    /// ends within tens of milliseconds: its poll() wakes on a pipe).
    public func stop(deadline: Double) {
        thread.expectEnd()
        guard control.requestStop() else { return }
        if !thread.waitForEnd(until: deadline) {
            logger.warn("hid reader did not stop in time")
        }
        passThrough?.keyboard.stop(deadline: deadline)
    }

    /// Stops the reader thread within 1 s.
    public func stop() { stop(deadline: MonotonicClock.deadline(after: 0.9)) }

    /// One line for the startup log and status: which scanners are read, or that none is there yet.
    public var summary: String { state.summary }

    /// The source's state: the summary, and up while at least one scanner is open and read.
    public var state: SourceState {
        control.status.withLock { state in
            if let note = state.note { return SourceState(note, up: false) }
            if state.scanners.isEmpty {
                return SourceState("no scanners found: waiting for one to be plugged in", up: false)
            }
            let list = state.scanners.map { "\($0.name) (\($0.devnode)\($0.grabbed ? ", grabbed" : ""))" }
            return SourceState(
                "\(state.scanners.count) scanner\(state.scanners.count == 1 ? "" : "s"): "
                    + list.joined(separator: ", "), up: true)
        }
    }

    /// Reads an already open fd as a scanner named `name` (a pipe, FIFO or evdev node carrying raw
    /// `input_event` records), with `layout` or the configured one. The source owns (and closes) the fd.
    public func attach(fd: Int32, name: String, layout: KeyboardLayout? = nil) {
        var decoder = Self.decoderConfiguration(config, logger: logger, layoutName: nil, variant: nil)
        if let layout { decoder.layout = layout }
        let device = InputDeviceInfo(devnode: "fd:\(fd)", name: name)
        control.post(.attach(fd: fd, identity: ScannerIdentity(device: device, name: name, decoder: decoder)))
    }

    /// Opens `devnode` as a scanner named `name` the way a udev add does, EACCES/ENOENT retries included
    /// (tests: a FIFO that appears late).
    func open(devnode: String, name: String) {
        let device = InputDeviceInfo(devnode: devnode, syspath: devnode, name: name, tagged: true)
        let decoder = Self.decoderConfiguration(config, logger: logger, layoutName: nil, variant: nil)
        control.post(.open(device, ScannerIdentity(device: device, name: name, decoder: decoder)))
    }

    /// The decoder settings for a scanner whose `hid.match` rule names `layoutName`/`variant` (nil: none).
    /// The layout was checked at load; should xkb still fail to compile it, the scanner decodes as `us` and
    /// the log says why.
    static func decoderConfiguration(
        _ config: BridgeConfig.HID, logger: Logger, layoutName: String?, variant: String?
    ) -> KeystrokeDecoder.Configuration {
        let (wanted, wantedVariant) = layoutChoice(config, layoutName, variant)
        let layout: KeyboardLayout
        do {
            layout = try XKBLayouts.layout(wanted, variant: wantedVariant)
        } catch {
            logger.error(
                "cannot compile the keyboard layout: using us", [("layout", wanted), ("error", error.message)])
            layout = (try? XKBLayouts.layout("us")) ?? emptyLayout
        }
        return KeystrokeDecoder.Configuration(
            layout: layout, suffix: config.suffix == .tab ? .tab : .enter, maxLineLength: config.maxLineLength,
            interKeyTimeout: config.interKeyTimeout)
    }
}
