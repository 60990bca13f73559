import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import SourceKit
import Udev

/// Serial barcode scanners (`serial` section): ttys that a `serial.match` rule names, found through udev with
/// hot-plug, opened exclusively in raw mode, their byte stream cut into codes by `SerialFramer`; every code is
/// submitted as a `Read` (`source.kind = serial`, device = the port's stable name).
///
/// This type is the lifecycle: it starts and stops the reader thread (`DeviceNodeLoop` over `SerialPorts`: one
/// `poll()` over every port, the udev monitor and a wake pipe). Debouncing is the pipeline's job.
public final class SerialSource: ReadSource {
    public let kind = SourceKind.serial
    private let config: SerialConfig
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    private let udev: Bool
    let control: SerialControl

    /// Nothing runs before `start()`. `udev: false` (benchmarks) reads only the ports `attach` names.
    public init(
        config: SerialConfig, logger: Logger, udev: Bool = true, submit: @escaping @Sendable (Read) -> Void,
        stateChanged: @escaping @Sendable () -> Void = {}
    ) {
        self.control = SerialControl(
            reader: DeviceNodeReader(name: "serial-reader", what: "serial", logger: logger, stateChanged: stateChanged))
        self.config = config
        self.logger = logger
        self.udev = udev
        self.submit = submit
    }

    /// Opens the tty at `path` as a matched port named `name`, besides those udev finds: the seam `plings-bench
    /// serial` times the reader through (a pty).
    public func attach(path: String, name: String) {
        control.attachments.withLock { $0.append(SerialPortInfo(DeviceIdentity(devnode: path, fullSerial: name))) }
        control.reader.control.wakePipe?.signal()
    }

    /// Starts the reader thread and waits (at most 2 s) until the ports present now are open. With no
    /// `serial.match` rule there is nothing to watch: no thread starts.
    public func start() {
        guard config.enabled else { return control.reader.idle(because: "disabled (serial.enabled is false)") }
        guard !config.match.isEmpty || !udev else {
            return control.reader.idle(because: "no serial.match rule: no serial port is opened")
        }
        control.reader.start { [self] ready in
            let ports = SerialPorts(control: control, config: config, logger: logger, submit: submit)
            DeviceNodeLoop(ports, reader: control.reader.control, logger: logger).run(udev: udev, ready: ready)
        }
    }

    /// Stops the reader thread and closes every port by `deadline`.
    public func stop(deadline: Double) { control.reader.stop(deadline: deadline) }

    /// Which ports are read, and up while at least one is.
    public var state: SourceState {
        let (text, up) = control.reader.state(
            noun: "port(s)", waiting: "no serial scanner found: waiting for one that serial.match names")
        return SourceState(text, up: up)
    }
}

/// What `SerialSource` and its reader thread share: the reader's lifecycle and status, and the ports `attach` names.
final class SerialControl: Sendable {
    let reader: DeviceNodeReader
    /// Ports named by `attach`, for the reader thread to open.
    let attachments = Mutex<[SerialPortInfo]>([])

    init(reader: DeviceNodeReader) { self.reader = reader }
}

/// One USB serial port as `plings-bridge scanners` reports it (docs/contracts.md, "Command line"): what udev says
/// of it, whether a `serial.match` rule names it, and whether this user may read it.
public struct SerialPortListing: Sendable, Equatable {
    public var port: SerialPortInfo
    public var matched: Bool
    public var reason: String
    public var openable: Bool

    /// As `plings-bridge scanners` lists it: `transport` `serial`, `grabbable` null (a serial port is opened
    /// exclusively instead); udev's model string has underscores for spaces.
    public var listing: DeviceListing {
        DeviceListing(
            transport: "serial", devnode: port.devnode, nodeKind: "serial port",
            product: port.model?.replacingOccurrences(of: "_", with: " "), vendor: port.vendor, model: port.product,
            serial: port.serial, path: port.path, matched: matched, reason: reason, stableName: port.stableName,
            openable: openable)
    }
}

extension SerialSource {
    /// Every USB serial port udev knows (a tty with a USB vendor id), and every other tty a `serial.match` rule
    /// names (an RS-232 port by its node), with the rule that names it, if any, and whether this user may read it.
    /// The built-in ttyS* and consoles no rule names are left out. Opens nothing: the running service may hold a
    /// port exclusively.
    public static func scan(config: SerialConfig) -> [SerialPortListing] {
        guard let udev = try? UdevContext() else { return [] }
        return udev.devices(subsystem: "tty").compactMap { device in
            guard var port = SerialPorts.info(device) else { return nil }
            let rule = config.match.firstIndex { $0.matches(port) }
            port.operatorName = rule.flatMap { config.match[$0].name }
            guard port.vendor != nil || rule != nil else { return nil }
            let reason: String
            if let rule {
                reason = "serial.match[\(rule)]"
            } else if config.match.isEmpty {
                reason = "no serial.match rule: serial ports are read only when a rule names them"
            } else {
                reason = "no serial.match rule names it"
            }
            return SerialPortListing(
                port: port, matched: rule != nil, reason: reason, openable: access(port.devnode, R_OK) == 0)
        }
    }
}
