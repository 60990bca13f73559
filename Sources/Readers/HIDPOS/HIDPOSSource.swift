import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import SourceKit
import Udev

/// Barcode scanners in HID POS mode (`hidpos` section): hidraw nodes whose report descriptor has a Bar Code Scanner
/// application collection, found through udev with hot-plug; each code is put together from its Scanned Data
/// Reports (`HIDPOSAssembler`) and committed as a `Read` (`source.kind = hidpos`, the AIM identifier in
/// `symbology`), then the scanner is told the outcome (`hidpos.feedback`).
///
/// This type is the lifecycle: it starts and stops the reader thread (`DeviceNodeLoop` over `HIDPOSScanners`: one
/// `poll()` over every node, the udev monitor and a wake pipe).
public final class HIDPOSSource: ReadSource {
    public let kind = SourceKind.hidpos
    private let config: HIDPOSConfig
    private let hosts: [String]
    private let logger: Logger
    private let commit: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    private let udev: Bool
    let control: HIDPOSControl

    /// Nothing runs before `start()`. `hosts`: the Plings URL hosts, to tell a Plings code from another.
    /// `udev: false` (benchmarks) watches only what `attach` hands over.
    public init(
        config: HIDPOSConfig, hosts: [String], logger: Logger, udev: Bool = true,
        commit: @escaping @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void,
        stateChanged: @escaping @Sendable () -> Void = {}
    ) {
        self.control = HIDPOSControl(
            reader: DeviceNodeReader(name: "hidpos-reader", what: "HID POS", logger: logger, stateChanged: stateChanged)
        )
        self.config = config
        self.hosts = hosts
        self.logger = logger
        self.udev = udev
        self.commit = commit
    }

    /// Reads reports from `fd` (taken over: the reader closes it) as a scanner with `layout`, besides the nodes
    /// udev finds: the seam `plings-bench hidpos` times the reader through (a pipe carries one report per read).
    public func attach(fd: Int32, name: String, layout: HIDPOSLayout) {
        control.attachments.withLock {
            $0.append((fd, HIDPOSDeviceInfo(DeviceIdentity(devnode: name, fullSerial: name)), layout))
        }
        control.reader.control.wakePipe?.signal()
    }

    /// Starts the reader thread and waits (at most 2 s) until the scanners present now are open.
    public func start() {
        guard config.enabled else { return control.reader.idle(because: "disabled (hidpos.enabled is false)") }
        let parser = PlingsURLParser(hosts: hosts)
        control.reader.start { [self] ready in
            let scanners = HIDPOSScanners(
                control: control, config: config, parser: parser, logger: logger, commit: commit)
            DeviceNodeLoop(scanners, reader: control.reader.control, logger: logger).run(udev: udev, ready: ready)
        }
    }

    /// Stops the reader thread and closes every node by `deadline`.
    public func stop(deadline: Double) { control.reader.stop(deadline: deadline) }

    /// Which scanners are read, and up while at least one is.
    public var state: SourceState {
        let (text, up) = control.reader.state(noun: "scanner(s)", waiting: "no HID POS scanner found: waiting for one")
        return SourceState(text, up: up)
    }
}

/// What `HIDPOSSource`, the pipeline's commit callbacks and the reader thread share: the reader's lifecycle and
/// status, the feedback waiting to be written, and the descriptors `attach` hands over.
final class HIDPOSControl: Sendable {
    let reader: DeviceNodeReader
    /// Outcomes of committed codes, for the reader thread to signal on their scanners (it owns the nodes).
    let feedback = Mutex<[(devnode: String, outcome: FeedbackOutcome)]>([])
    /// Descriptors handed over by `attach`, for the reader thread to take.
    let attachments = Mutex<[(fd: Int32, info: HIDPOSDeviceInfo, layout: HIDPOSLayout)]>([])

    init(reader: DeviceNodeReader) { self.reader = reader }

    /// Queues feedback for the reader thread; called on the pipeline's thread, so it never blocks.
    func signal(_ outcome: FeedbackOutcome, on devnode: String) {
        feedback.withLock { $0.append((devnode, outcome)) }
        reader.control.wakePipe?.signal()
    }
}

/// One hidraw node as `plings-bridge scanners` reports it: what udev says of it, whether its descriptor is a HID
/// POS scanner's (and if not, why), whether a rule allows it, and whether this user may open it.
public struct HIDPOSListing: Sendable, Equatable {
    public var device: HIDPOSDeviceInfo
    public var layout: HIDPOSLayout?
    public var matched: Bool
    public var reason: String
    public var openable: Bool

    /// As `plings-bridge scanners` lists it: `transport` `hidpos`, never grabbed (`grabbable` null).
    public var listing: DeviceListing {
        DeviceListing(
            transport: "hidpos", devnode: device.devnode, nodeKind: "hidraw", product: device.model,
            vendor: device.vendor, model: device.product, serial: device.serial, path: device.path, matched: matched,
            matchedAs: "HID POS scanner", reason: reason, stableName: device.stableName, openable: openable)
    }
}

extension HIDPOSSource {
    /// Every hidraw node udev knows, with its descriptor's verdict and the rule that allows it. Opens no node
    /// (the descriptor is read from sysfs, which needs no permission).
    public static func scan(config: HIDPOSConfig) -> [HIDPOSListing] {
        guard let udev = try? UdevContext() else { return [] }
        return udev.devices(subsystem: "hidraw", parents: HIDPOSScanners.hidParents).map { device in
            var info = HIDPOSScanners.info(device)
            let verdict = HIDPOSScanners.layout(of: info)
            let reason: String
            var matched = false
            switch verdict {
            case .failure(let why): reason = why.description
            case .success:
                if config.match.isEmpty {
                    matched = true
                    reason = "a Bar Code Scanner collection (usage page 0x8C)"
                } else if let rule = config.match.firstIndex(where: { $0.matches(info) }) {
                    matched = true
                    info.operatorName = config.match[rule].name
                    reason = "hidpos.match[\(rule)]"
                } else {
                    reason = "a HID POS scanner no hidpos.match rule names"
                }
            }
            let mode = config.feedback == .none ? R_OK : R_OK | W_OK
            return HIDPOSListing(
                device: info, layout: try? verdict.get(), matched: matched, reason: reason,
                openable: access(info.devnode, mode) == 0)
        }
    }
}
