import BridgeCore
import Foundation
import Glibc
import Logging
import Platform
import Udev

/// Serial scanners as a kind of device node for `DeviceNodeLoop` (which owns udev, the `poll()`, open retries and
/// closing): the ttys a `serial.match` rule names, opened exclusively in raw mode, their bytes cut into codes by a
/// `SerialFramer` per port. Used on the reader thread only.
final class SerialPorts: DeviceNodeKind {
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

    let label = "serial"
    let noun = "serial scanner"
    let subsystem = "tty"
    let parents: [String: [String]] = [:]
    /// ModemManager may hold a new ttyACM for ~10 s.
    let retryInterval: Double = 1
    let maxAttempts = 30

    private let control: SerialControl
    private let config: SerialConfig
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    private var buffer = [UInt8](repeating: 0, count: 4096)

    init(control: SerialControl, config: SerialConfig, logger: Logger, submit: @escaping @Sendable (Read) -> Void) {
        self.control = control
        self.config = config
        self.logger = logger
        self.submit = submit
    }

    /// A port a `serial.match` rule names, with the first such rule's `name` as the operator's.
    func candidate(_ device: UdevDevice) -> SerialPortInfo? {
        guard var info = SerialPorts.info(device), let rule = config.match.first(where: { $0.matches(info) }) else {
            return nil
        }
        info.operatorName = rule.name
        return info
    }

    func devnode(of candidate: SerialPortInfo) -> String { candidate.devnode }

    static func info(_ device: UdevDevice) -> SerialPortInfo? {
        guard let devnode = device.devnode else { return nil }
        return SerialPortInfo(
            DeviceIdentity(
                devnode: devnode, vendor: (device["ID_VENDOR_ID"] ?? device.usb["idVendor"])?.lowercased(),
                product: (device["ID_MODEL_ID"] ?? device.usb["idProduct"])?.lowercased(),
                serial: device["ID_SERIAL_SHORT"] ?? device.usb["serial"],
                model: device["ID_MODEL"] ?? device.usb["product"], path: device["ID_PATH"],
                fullSerial: device["ID_SERIAL"]),
            modemManagerIgnores: device["ID_MM_DEVICE_IGNORE"] == "1")
    }

    func open(_ info: SerialPortInfo) throws(SystemError) -> (node: Port, fields: [(String, String)]) {
        var notExclusive: String?
        let fd = try SerialPort.open(info.devnode, baud: config.baud, notExclusive: &notExclusive)
        let port = Port(
            info: info, fd: fd,
            framer: SerialFramer(
                suffix: config.suffix, prefix: config.prefix?.byte, maxLength: config.maxLength,
                interByteTimeout: config.interByteTimeout))
        var fields = [("device", info.stableName), ("devnode", info.devnode)]
        if let notExclusive { fields.append(("exclusive", "no: \(notExclusive)")) }
        return (port, fields)
    }

    func fd(of node: Port) -> Int32 { node.fd.rawValue }

    func tick(_ node: Port, now: Double) {
        if let output = node.framer.tick(now: now) { handle(output, node) }
    }

    func deadline(of node: Port) -> Double? { node.framer.pendingDeadline() }

    /// Ports named by `attach` (a pty the benchmark types into), opened at once, without retries.
    func afterWake(nodes: [String: Port], now: Double) -> [(devnode: String, node: Port)] {
        let attached = control.attachments.withLock { queue in
            defer { queue = [] }
            return queue
        }
        var opened: [(devnode: String, node: Port)] = []
        for info in attached {
            do {
                let (port, fields) = try open(info)
                logger.info("serial scanner attached", fields)
                opened.append((info.devnode, port))
            } catch {
                logger.error(
                    "serial scanner cannot be opened", [("devnode", info.devnode), ("error", error.description)])
            }
        }
        return opened
    }

    /// Reads what arrived until the port has nothing more (it is non-blocking); a reason to close a gone device.
    func read(_ port: Port, revents: Int16, now: Double) -> String? {
        while true {
            let count: Int
            do {
                count = try port.fd.read(into: &buffer)
            } catch  where error.errno == EAGAIN {
                return revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 ? "hang-up" : nil
            } catch  where error.errno == EIO || error.errno == ENODEV {
                return error.description
            } catch {
                logger.error(
                    "serial read failed: closing the port",
                    [("devnode", port.info.devnode), ("error", error.description)])
                return "read error"
            }
            if count == 0 { return "end of file" }
            port.framer.feed(buffer[0..<count], now: now) { handle($0, port) }
            if count < buffer.count { return nil }
        }
    }

    func fix(for errno: Int32) -> String {
        switch errno {
        case EACCES, EPERM: return "install the udev rule (group plings, mode 0660) or add the port's group"
        case EBUSY: return "another program holds the port (ModemManager: set ID_MM_DEVICE_IGNORE=1 in udev)"
        default: return "check the cable and serial.match"
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

    func nodesChanged(_ nodes: [String: Port]) {
        control.reader.publish(nodes.values.map { ($0.info.devnode, $0.info.stableName) })
    }
}
