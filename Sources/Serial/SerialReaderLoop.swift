import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import Udev

/// The serial reader thread's loop: one `poll()` over every open port, the udev monitor and the wake pipe. Its
/// timeout is the nearest unfinished code's deadline or a pending open retry; otherwise it sleeps until something
/// happens: no busy polling. Used on that thread only (libudev objects are not thread-safe).
final class SerialReaderLoop {
    /// One open port.
    final class Port {
        let info: SerialPortInfo
        let fd: FileDescriptor
        var framer: SerialFramer

        init(info: SerialPortInfo, fd: consuming FileDescriptor, framer: SerialFramer) {
            self.info = info
            self.fd = fd
            self.framer = framer
        }
    }

    /// A matched port that could not be opened yet (udev not done with its permissions, ModemManager probing it).
    struct Retry {
        var info: SerialPortInfo
        var at: Double
        var attempts: Int
        var lastError: String
    }

    /// How often and how long an open is retried: ModemManager may hold a new ttyACM for ~10 s.
    static let retryInterval: Double = 1
    static let maxAttempts = 30

    private let control: SerialControl
    private let config: SerialConfig
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    private var ports: [String: Port] = [:]
    private var retries: [String: Retry] = [:]
    private var buffer = [UInt8](repeating: 0, count: 4096)

    init(control: SerialControl, config: SerialConfig, logger: Logger, submit: @escaping @Sendable (Read) -> Void) {
        self.control = control
        self.config = config
        self.logger = logger
        self.submit = submit
    }

    /// Runs until the source stops; `ready` is called once the ports present at start are open.
    func run(udev useUdev: Bool, ready: () -> Void) {
        var monitor: UdevDeviceMonitor?
        var udev: UdevContext?
        do {
            if useUdev {
                let context = try UdevContext()
                udev = context
                monitor = try context.monitor(subsystem: "tty")
            }
        } catch {
            logger.error("serial: udev unavailable: hot-plug is not followed", [("error", error.description)])
        }
        for device in udev?.devices(subsystem: "tty") ?? [] { consider(device, now: MonotonicClock.now()) }
        publishStatus()
        ready()
        while !control.reader.isStopping {
            var fds = [pollfd(fd: control.reader.wakePipe?.readFD ?? -1, events: Int16(POLLIN), revents: 0)]
            fds.append(pollfd(fd: monitor?.fd ?? -1, events: Int16(POLLIN), revents: 0))
            let order = Array(ports.values)
            for port in order { fds.append(pollfd(fd: port.fd.rawValue, events: Int16(POLLIN), revents: 0)) }
            let timeout = pollTimeout(now: MonotonicClock.now())
            let ready: Int32
            do {
                ready = try systemCall("poll") { poll(&fds, nfds_t(fds.count), timeout) }
            } catch {
                logger.error("serial: poll failed", [("error", error.description)])
                // Never spin on a persistent poll error (ENOMEM): pause, then rebuild the set.
                MonotonicClock.sleep(seconds: 0.1)
                continue
            }
            let now = MonotonicClock.now()
            if ready > 0 {
                if fds[0].revents != 0 { control.reader.wakePipe?.drain() }
                if fds[1].revents != 0, let monitor {
                    for event in monitor.receive() { hotplug(event, now: now) }
                }
                for (index, port) in order.enumerated() where fds[index + 2].revents != 0 {
                    read(port.info.devnode, revents: fds[index + 2].revents, now: now)
                }
            }
            for port in ports.values {
                if let output = port.framer.tick(now: now) { handle(output, port) }
            }
            for info in control.attachments.withLock({ queue in
                defer { queue = [] }
                return queue
            }) {
                open(info, now: now, attempt: SerialReaderLoop.maxAttempts)
            }
            retryOpens(now: now)
        }
        for devnode in Array(ports.keys) { close(devnode, why: "stopping") }
    }

    /// Milliseconds until the nearest framer deadline or open retry; -1 (sleep until something happens) when none.
    private func pollTimeout(now: Double) -> Int32 {
        var nearest = Double.infinity
        for port in ports.values { nearest = min(nearest, port.framer.pendingDeadline() ?? .infinity) }
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

    /// Opens `device` when a `serial.match` rule names it.
    private func consider(_ device: UdevDevice, now: Double) {
        guard let info = SerialReaderLoop.info(device), ports[info.devnode] == nil,
            config.match.contains(where: { $0.matches(info) })
        else { return }
        open(info, now: now, attempt: 1)
    }

    static func info(_ device: UdevDevice) -> SerialPortInfo? {
        guard let devnode = device.devnode else { return nil }
        return SerialPortInfo(
            devnode: devnode, vendor: (device["ID_VENDOR_ID"] ?? device.usb["idVendor"])?.lowercased(),
            product: (device["ID_MODEL_ID"] ?? device.usb["idProduct"])?.lowercased(),
            serial: device["ID_SERIAL_SHORT"] ?? device.usb["serial"],
            model: device["ID_MODEL"] ?? device.usb["product"], path: device["ID_PATH"],
            fullSerial: device["ID_SERIAL"], modemManagerIgnores: device["ID_MM_DEVICE_IGNORE"] == "1")
    }

    private func open(_ info: SerialPortInfo, now: Double, attempt: Int) {
        var notExclusive: String?
        do {
            let fd = try SerialPort.open(info.devnode, baud: config.baud, notExclusive: &notExclusive)
            retries[info.devnode] = nil
            ports[info.devnode] = Port(
                info: info, fd: fd,
                framer: SerialFramer(
                    suffix: config.suffix, prefix: config.prefix?.byte, maxLength: config.maxLength,
                    interByteTimeout: config.interByteTimeout))
            var fields = [("device", info.stableName), ("devnode", info.devnode)]
            if let notExclusive { fields.append(("exclusive", "no: \(notExclusive)")) }
            logger.info("serial scanner attached", fields)
        } catch {
            let retryable = [EACCES, EBUSY, EPERM, ENOENT, EAGAIN].contains(error.errno)
            if retryable, attempt < SerialReaderLoop.maxAttempts {
                if attempt == 1 {
                    logger.warn(
                        "serial scanner not openable yet; retrying",
                        [("devnode", info.devnode), ("error", error.description)])
                }
                retries[info.devnode] = Retry(
                    info: info, at: now + SerialReaderLoop.retryInterval, attempts: attempt,
                    lastError: error.description)
            } else {
                retries[info.devnode] = nil
                logger.error(
                    "serial scanner cannot be opened; re-plug it once fixed",
                    [
                        ("devnode", info.devnode), ("error", error.description),
                        ("fix", SerialReaderLoop.fix(for: error.errno)),
                    ])
            }
        }
        publishStatus()
    }

    static func fix(for errno: Int32) -> String {
        switch errno {
        case EACCES, EPERM: return "install the udev rule (group plings, mode 0660) or add the port's group"
        case EBUSY: return "another program holds the port (ModemManager: set ID_MM_DEVICE_IGNORE=1 in udev)"
        default: return "check the cable and serial.match"
        }
    }

    private func retryOpens(now: Double) {
        for retry in retries.values where retry.at <= now {
            open(retry.info, now: now, attempt: retry.attempts + 1)
        }
    }

    /// Reads what arrived until the port has nothing more (it is non-blocking); a gone device is closed.
    private func read(_ devnode: String, revents: Int16, now: Double) {
        guard let port = ports[devnode] else { return }
        while true {
            let count: Int
            do {
                count = try port.fd.read(into: &buffer)
            } catch  where error.errno == EAGAIN {
                if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { close(devnode, why: "hang-up") }
                return
            } catch  where error.errno == EIO || error.errno == ENODEV {
                close(devnode, why: error.description)
                return
            } catch {
                logger.error(
                    "serial read failed: closing the port", [("devnode", devnode), ("error", error.description)])
                close(devnode, why: "read error")
                return
            }
            if count == 0 {
                close(devnode, why: "end of file")
                return
            }
            port.framer.feed(buffer[0..<count], now: now) { handle($0, port) }
            if count < buffer.count { return }
        }
    }

    private func handle(_ output: SerialFramer.Output, _ port: Port) {
        switch output {
        case .code(let bytes):
            // The text as sent: codes are ASCII or UTF-8 (a byte that is neither becomes U+FFFD; set the scanner
            // to UTF-8 output).
            submit(
                Read(
                    sourceKind: .serial, device: port.info.stableName, raw: String(decoding: bytes, as: UTF8.self),
                    time: Date()))
        case .discarded(let reason):
            logger.warn("scan discarded", [("device", port.info.stableName), ("reason", describe(reason))])
        }
    }

    private func describe(_ reason: SerialFramer.DiscardReason) -> String {
        switch reason {
        case .overlong(let limit):
            return "code longer than serial.maxLength (\(limit) bytes): raise it, or check the scanner's suffix"
        case .unfinished(let bytes):
            return "\(bytes) bytes without the \(config.suffix.rawValue) suffix within serial.interByteTimeout: half a "
                + "scan, or the scanner sends another suffix"
        case .outsideFrame(let bytes):
            return "\(bytes) bytes outside a \(config.prefix?.rawValue ?? "prefix") ... suffix frame"
        }
    }

    private func close(_ devnode: String, why: String) {
        guard ports.removeValue(forKey: devnode) != nil else { return }
        logger.info("serial scanner detached", [("devnode", devnode), ("why", why)])
        publishStatus()
    }

    private func publishStatus() {
        let open = ports.values.sorted { $0.info.devnode < $1.info.devnode }.map {
            (devnode: $0.info.devnode, name: $0.info.stableName)
        }
        control.status.withLock { $0.ports = open }
        control.stateChanged()
    }
}
