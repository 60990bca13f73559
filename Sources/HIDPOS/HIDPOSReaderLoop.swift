import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import Udev

/// The HID POS reader thread's loop: one `poll()` over every open hidraw node, the udev monitor and the wake pipe.
/// Its timeout is the nearest unfinished code's deadline or a pending open retry; otherwise it sleeps until
/// something happens. Used on that thread only (libudev objects are not thread-safe; the nodes are written here
/// too, for feedback).
final class HIDPOSReaderLoop {
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

    struct Retry {
        var info: HIDPOSDeviceInfo
        var layout: HIDPOSLayout
        var at: Double
        var attempts: Int
    }

    /// udev applies the package rule's group a moment after the node appears: retry a refused open for 10 s.
    static let retryInterval: Double = 0.5
    static let maxAttempts = 20
    /// What `UdevContext` reads of a hidraw node's HID parent.
    static let parents = ["hid": ["syspath", "HID_NAME", "HID_UNIQ"]]

    private let control: HIDPOSControl
    private let config: HIDPOSConfig
    private let parser: PlingsURLParser
    private let logger: Logger
    private let commit: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    private var devices: [String: Device] = [:]
    private var retries: [String: Retry] = [:]

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

    /// Runs until the source stops; `ready` is called once the scanners present at start are open.
    func run(udev useUdev: Bool, ready: () -> Void) {
        var monitor: UdevDeviceMonitor?
        var udev: UdevContext?
        do {
            if useUdev {
                let context = try UdevContext()
                udev = context
                monitor = try context.monitor(subsystem: "hidraw", parents: HIDPOSReaderLoop.parents)
            }
        } catch {
            logger.error("hidpos: udev unavailable: hot-plug is not followed", [("error", error.description)])
        }
        let present = udev?.devices(subsystem: "hidraw", parents: HIDPOSReaderLoop.parents) ?? []
        for device in present { consider(device, now: MonotonicClock.now()) }
        publishStatus()
        ready()
        while !control.reader.isStopping {
            var fds = [pollfd(fd: control.reader.wakePipe?.readFD ?? -1, events: Int16(POLLIN), revents: 0)]
            fds.append(pollfd(fd: monitor?.fd ?? -1, events: Int16(POLLIN), revents: 0))
            let order = Array(devices.values)
            for device in order { fds.append(pollfd(fd: device.fd.rawValue, events: Int16(POLLIN), revents: 0)) }
            let ready: Int32
            do {
                ready = try systemCall("poll") { poll(&fds, nfds_t(fds.count), pollTimeout(now: MonotonicClock.now())) }
            } catch {
                logger.error("hidpos: poll failed", [("error", error.description)])
                MonotonicClock.sleep(seconds: 0.1)  // never spin on a persistent poll error (ENOMEM)
                continue
            }
            let now = MonotonicClock.now()
            if ready > 0 {
                if fds[0].revents != 0 { control.reader.wakePipe?.drain() }
                if fds[1].revents != 0, let monitor {
                    for event in monitor.receive() { hotplug(event, now: now) }
                }
                for (index, device) in order.enumerated() where fds[index + 2].revents != 0 {
                    read(device.info.devnode, revents: fds[index + 2].revents, now: now)
                }
            }
            for device in devices.values {
                if let output = device.assembler.tick(now: now) { handle(output, device) }
            }
            writeFeedback()
            takeAttachments()
            retryOpens(now: now)
        }
        for devnode in Array(devices.keys) { close(devnode, why: "stopping") }
    }

    private func takeAttachments() {
        let handed = control.attachments.withLock { queue in
            defer { queue = [] }
            return queue
        }
        for (fd, info, layout) in handed {
            devices[info.devnode] = Device(
                info: info, fd: FileDescriptor(adopting: fd), writable: false, layout: layout)
        }
        if !handed.isEmpty { publishStatus() }
    }

    private func pollTimeout(now: Double) -> Int32 {
        var nearest = Double.infinity
        for device in devices.values { nearest = min(nearest, device.assembler.pendingDeadline() ?? .infinity) }
        for retry in retries.values { nearest = min(nearest, retry.at) }
        return control.reader.pollTimeout(until: nearest, now: now)
    }

    private func hotplug(_ event: UdevDeviceMonitor.Event, now: Double) {
        guard let devnode = event.device.devnode else { return }
        switch event.action {
        case "add": consider(event.device, now: now)
        case "remove":
            retries[devnode] = nil
            close(devnode, why: "unplugged")
        default: break
        }
        publishStatus()
    }

    /// Opens `device` when its descriptor is a HID POS scanner's and `hidpos.match` (if any) names it.
    private func consider(_ device: UdevDevice, now: Double) {
        let info = HIDPOSReaderLoop.info(device)
        guard devices[info.devnode] == nil, case .success(let layout) = HIDPOSReaderLoop.layout(of: info),
            config.match.isEmpty || config.match.contains(where: { $0.matches(info) })
        else { return }
        open(info, layout: layout, now: now, attempt: 1)
    }

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
            devnode: device.devnode ?? "/dev/" + device.sysname,
            vendor: (device["ID_VENDOR_ID"] ?? usb["idVendor"])?.lowercased(),
            product: (device["ID_MODEL_ID"] ?? usb["idProduct"])?.lowercased(),
            serial: device["ID_SERIAL_SHORT"] ?? usb["serial"] ?? hid["HID_UNIQ"],
            model: usb["product"] ?? hid["HID_NAME"], path: device["ID_PATH"], fullSerial: fullSerial,
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

    private func open(_ info: HIDPOSDeviceInfo, layout: HIDPOSLayout, now: Double, attempt: Int) {
        let wantsWrite =
            config.feedback != .none
            && (layout.errorBeep != nil || layout.goodReadBeep != nil || layout.goodReadLED != nil)
        let flags = O_NONBLOCK | O_CLOEXEC | O_NOCTTY
        do {
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
            retries[info.devnode] = nil
            devices[info.devnode] = Device(info: info, fd: fd, writable: writable, layout: layout)
            logger.info(
                "HID POS scanner attached",
                [("device", info.stableName), ("devnode", info.devnode), ("reportID", String(layout.reportID))])
        } catch {
            let retryable = [EACCES, EPERM, ENOENT, EBUSY, EAGAIN].contains(error.errno)
            if retryable, attempt < HIDPOSReaderLoop.maxAttempts {
                if attempt == 1 {
                    logger.warn(
                        "HID POS scanner not openable yet; retrying",
                        [("devnode", info.devnode), ("error", error.description)])
                }
                retries[info.devnode] = Retry(
                    info: info, layout: layout, at: now + HIDPOSReaderLoop.retryInterval, attempts: attempt)
            } else {
                retries[info.devnode] = nil
                logger.error(
                    "HID POS scanner cannot be opened; re-plug it once fixed",
                    [
                        ("devnode", info.devnode), ("error", error.description),
                        (
                            "fix",
                            "install the package's udev rule (group plings), or run as a member of the node's group"
                        ),
                    ])
            }
        }
        publishStatus()
    }

    private func retryOpens(now: Double) {
        for retry in retries.values where retry.at <= now {
            open(retry.info, layout: retry.layout, now: now, attempt: retry.attempts + 1)
        }
    }

    /// Reads every report waiting (the node is non-blocking; each read returns one report); a gone device is
    /// closed.
    private func read(_ devnode: String, revents: Int16, now: Double) {
        guard let device = devices[devnode] else { return }
        var buffer = [UInt8](repeating: 0, count: max(1, device.assembler.layout.maximumInputLength))
        for _ in 0..<64 {
            let count: Int
            do {
                count = try device.fd.read(into: &buffer)
            } catch  where error.errno == EAGAIN {
                if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { close(devnode, why: "hang-up") }
                return
            } catch {
                // ENODEV, EIO: unplugged; anything else: not a node we can read.
                close(devnode, why: error.description)
                return
            }
            if count == 0 {
                close(devnode, why: "end of file")
                return
            }
            for output in device.assembler.feed(Array(buffer[0..<count]), now: now) { handle(output, device) }
        }
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
    private func writeFeedback() {
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

    private func close(_ devnode: String, why: String) {
        guard devices.removeValue(forKey: devnode) != nil else { return }
        logger.info("HID POS scanner detached", [("devnode", devnode), ("why", why)])
        publishStatus()
    }

    private func publishStatus() {
        let open = devices.values.sorted { $0.info.devnode < $1.info.devnode }.map {
            (devnode: $0.info.devnode, name: $0.info.stableName)
        }
        control.status.withLock { $0.devices = open }
        control.stateChanged()
    }
}
