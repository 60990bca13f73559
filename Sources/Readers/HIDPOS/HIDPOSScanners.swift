import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import Udev

/// HID POS scanners as a kind of device node for `DeviceNodeLoop` (which owns udev, the `poll()`, open retries
/// and closing): hidraw nodes whose report descriptor is a scanner's, each code put together from its reports,
/// feedback written back to the node. Used on the reader thread only (the nodes are written there too).
final class HIDPOSScanners: DeviceNodeKind {
    /// One open scanner.
    final class Device {
        let info: HIDPOSDeviceInfo
        let fd: FileDescriptor
        /// Opened for writing too (feedback on, and the node allowed it).
        let writable: Bool
        var assembler: HIDPOSAssembler

        init(info: HIDPOSDeviceInfo, fd: consuming FileDescriptor, writable: Bool, layout: HIDPOSLayout) {
            self.info = info
            self.fd = fd
            self.writable = writable
            self.assembler = HIDPOSAssembler(layout: layout)
        }
    }

    let label = "hidpos"
    let noun = "HID POS scanner"
    let subsystem = "hidraw"
    let parents = HIDPOSScanners.hidParents
    /// udev applies the package rule's group a moment after the node appears: retry a refused open for 10 s.
    let retryInterval: Double = 0.5
    let maxAttempts = 20
    /// What `UdevContext` reads of a hidraw node's HID parent.
    static let hidParents = ["hid": ["syspath", "HID_NAME", "HID_UNIQ"]]

    private let control: HIDPOSControl
    private let config: HIDPOSConfig
    private let parser: PlingsURLParser
    private let logger: Logger
    private let commit: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void

    init(
        control: HIDPOSControl, config: HIDPOSConfig, parser: PlingsURLParser, logger: Logger,
        commit: @escaping @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    ) {
        self.control = control
        self.config = config
        self.parser = parser
        self.logger = logger
        self.commit = commit
    }

    /// A node whose descriptor is a HID POS scanner's and that `hidpos.match` (if any) names.
    /// The first rule that matches gives the operator's name, if it has one.
    func candidate(_ device: UdevDevice) -> (info: HIDPOSDeviceInfo, layout: HIDPOSLayout)? {
        var info = HIDPOSScanners.info(device)
        guard case .success(let layout) = HIDPOSScanners.layout(of: info) else { return nil }
        if !config.match.isEmpty {
            guard let rule = config.match.first(where: { $0.matches(info) }) else { return nil }
            info.operatorName = rule.name
        }
        return (info, layout)
    }

    func devnode(of candidate: (info: HIDPOSDeviceInfo, layout: HIDPOSLayout)) -> String { candidate.info.devnode }

    static func info(_ device: UdevDevice) -> HIDPOSDeviceInfo {
        let hid = device.parents["hid"] ?? [:]
        let usb = device.usb
        // udev's ID_SERIAL is vendor_model_serial with spaces as underscores; hidraw nodes often lack it.
        // A scanner with no USB device above it (Bluetooth, uhid) is named by its HID name and serial instead.
        let usbNames = [usb["manufacturer"], usb["product"], usb["serial"]].compactMap { $0 }
        let hidNames = [hid["HID_NAME"], hid["HID_UNIQ"]].compactMap { $0 }
        let built = usbNames.count >= 2 ? usbNames : hidNames.count == 2 ? hidNames : []
        let fullSerial =
            device["ID_SERIAL"]
            ?? (built.isEmpty ? nil : built.joined(separator: "_").replacingOccurrences(of: " ", with: "_"))
        return HIDPOSDeviceInfo(
            DeviceIdentity(
                devnode: device.devnode ?? "/dev/" + device.sysname,
                vendor: (device["ID_VENDOR_ID"] ?? usb["idVendor"])?.lowercased(),
                product: (device["ID_MODEL_ID"] ?? usb["idProduct"])?.lowercased(),
                serial: device["ID_SERIAL_SHORT"] ?? usb["serial"] ?? hid["HID_UNIQ"],
                model: usb["product"] ?? hid["HID_NAME"], path: device["ID_PATH"], fullSerial: fullSerial),
            hidSyspath: hid["syspath"], usbSyspath: device.usbSyspath)
    }

    /// The scanner layout in the node's report descriptor (read from sysfs), or why there is none.
    static func layout(of info: HIDPOSDeviceInfo) -> Result<HIDPOSLayout, HIDPOSLayout.NotAScanner> {
        guard let syspath = info.hidSyspath else {
            return .failure(.init(description: "no HID device above the node"))
        }
        guard let bytes = readDescriptor(syspath + "/report_descriptor") else {
            return .failure(.init(description: "its report descriptor cannot be read from sysfs"))
        }
        switch HIDReportDescriptor.parse(bytes) {
        case .failure(let failure): return .failure(.init(description: "a malformed report descriptor: \(failure)"))
        case .success(let descriptor): return HIDPOSLayout.find(in: descriptor)
        }
    }

    static func readDescriptor(_ path: String) -> [UInt8]? {
        guard let fd = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) else { return nil }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: HIDReportDescriptor.maximumSize + 1)
        while bytes.count <= HIDReportDescriptor.maximumSize {
            guard let count = try? fd.read(into: &buffer), count > 0 else { break }
            bytes += buffer[0..<count]
        }
        return bytes.isEmpty ? nil : bytes
    }

    func open(_ candidate: (info: HIDPOSDeviceInfo, layout: HIDPOSLayout)) throws(SystemError)
        -> (node: Device, fields: [(String, String)])
    {
        let (info, layout) = candidate
        let wantsWrite =
            config.feedback != .none
            && (layout.errorBeep != nil || layout.goodReadBeep != nil || layout.goodReadLED != nil)
        let flags = O_NONBLOCK | O_CLOEXEC | O_NOCTTY
        var writable = wantsWrite
        let fd: FileDescriptor
        if wantsWrite, let both = try? FileDescriptor.open(info.devnode, O_RDWR | flags) {
            fd = both
        } else {
            fd = try FileDescriptor.open(info.devnode, O_RDONLY | flags)
            if wantsWrite {
                writable = false
                logger.warn(
                    "HID POS scanner opened read-only: no feedback",
                    [("devnode", info.devnode), ("fix", "the udev rule gives group plings read and write access")])
            }
        }
        return (
            Device(info: info, fd: fd, writable: writable, layout: layout),
            [("device", info.stableName), ("devnode", info.devnode), ("reportID", String(layout.reportID))]
        )
    }

    func fix(for errno: Int32) -> String {
        "install the package's udev rule (group plings), or run as a member of the node's group"
    }

    func fd(of node: Device) -> Int32 { node.fd.rawValue }

    func tick(_ node: Device, now: Double) {
        if let output = node.assembler.tick(now: now) { handle(output, node) }
    }

    func deadline(of node: Device) -> Double? { node.assembler.pendingDeadline() }

    /// Writes the feedback the pipeline's outcomes asked for, and takes the descriptors `attach` handed over.
    func afterWake(nodes: [String: Device], now: Double) -> [(devnode: String, node: Device)] {
        writeFeedback(nodes)
        let handed = control.attachments.withLock { queue in
            defer { queue = [] }
            return queue
        }
        return handed.map { fd, info, layout in
            (info.devnode, Device(info: info, fd: FileDescriptor(adopting: fd), writable: false, layout: layout))
        }
    }

    /// Reads every report waiting (the node is non-blocking; each read returns one report); a reason to close a
    /// gone device.
    func read(_ device: Device, revents: Int16, now: Double) -> String? {
        var buffer = [UInt8](repeating: 0, count: max(1, device.assembler.layout.maximumInputLength))
        for _ in 0..<64 {
            let count: Int
            do {
                count = try device.fd.read(into: &buffer)
            } catch  where error.errno == EAGAIN {
                return revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 ? "hang-up" : nil
            } catch {
                // ENODEV, EIO: unplugged; anything else: not a node we can read.
                return error.description
            }
            if count == 0 { return "end of file" }
            for output in device.assembler.feed(Array(buffer[0..<count]), now: now) { handle(output, device) }
        }
        return nil
    }

    private func handle(_ output: HIDPOSAssembler.Output, _ device: Device) {
        switch output {
        case .code(let bytes, let symbology):
            // Codes are ASCII or UTF-8 (a byte that is neither becomes U+FFFD; set the scanner to UTF-8 output).
            let read = Read(
                sourceKind: .hidpos, device: device.info.stableName, raw: String(decoding: bytes, as: UTF8.self),
                time: Date(), symbology: symbology)
            guard config.feedback != .none, device.writable else {
                commit(read) { _ in }
                return
            }
            let recognized = (try? parser.parse(read.raw).get()) != nil
            let control = self.control
            let devnode = device.info.devnode
            commit(read) { result in control.signal(FeedbackOutcome(result, recognized: recognized), on: devnode) }
        case .discarded(let reason):
            logger.warn("scan discarded", [("device", device.info.stableName), ("reason", reason)])
            if config.feedback != .none, device.writable { control.signal(.failed, on: device.info.devnode) }
        }
    }

    /// Writes the output reports for the outcomes the pipeline reported: the error beep for a code that is not a
    /// Plings URL or was not committed; with `feedback: all` also the good-read beep and LED.
    private func writeFeedback(_ devices: [String: Device]) {
        let pending = control.feedback.withLock { queue in
            defer { queue = [] }
            return queue
        }
        for (devnode, outcome) in pending {
            guard let device = devices[devnode], device.writable else { continue }
            let layout = device.assembler.layout
            let reports: [HIDPOSLayout.OutputBit?] =
                switch (outcome, config.feedback) {
                case (.accepted, .all): [layout.goodReadBeep, layout.goodReadLED]
                case (.accepted, _): []
                case (.unrecognized, .none), (.failed, .none): []
                case (.unrecognized, _), (.failed, _): [layout.errorBeep]
                }
            for bit in reports.compactMap({ $0 }) {
                do {
                    try device.fd.writeAll(bit.report)
                } catch {
                    logger.warn(
                        "HID POS feedback not written", [("devnode", devnode), ("error", error.description)])
                }
            }
        }
    }

    func nodesChanged(_ nodes: [String: Device]) {
        control.reader.publish(nodes.values.map { ($0.info.devnode, $0.info.stableName) })
    }
}
