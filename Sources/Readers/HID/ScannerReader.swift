import BridgeCore
import Foundation
import Glibc
import Logging
import Platform

/// What the reader needs to decode one scanner: who it is and how it types.
struct ScannerIdentity: Sendable {
    var devnode: String
    /// The stable name reads carry as their device (docs/contracts.md, "Spool record").
    var name: String
    /// The product name, for logs.
    var product: String
    var serial: String?
    var syspath: String
    var decoder: KeystrokeDecoder.Configuration

    /// The identity of `device` read under the stable `name`.
    init(device: InputDeviceInfo, name: String, decoder: KeystrokeDecoder.Configuration) {
        devnode = device.devnode
        self.name = name
        product = device.name
        serial = device.serial
        syspath = device.syspath
        self.decoder = decoder
    }
}

/// One open scanner on the reader thread. It owns the node's descriptor: dropping it closes the node.
final class OpenScanner {
    private let node: FileDescriptor
    let identity: ScannerIdentity
    var decoder: KeystrokeDecoder
    var parser = InputEventParser()
    var grabbed = false
    /// Grab requested but deferred until no key is held.
    var grabPending = false
    /// The current line's keys as typed (only with `hid.passThrough`).
    var keys = TypedKeys()

    init(node: consuming FileDescriptor, identity: ScannerIdentity) {
        self.node = node
        self.identity = identity
        decoder = KeystrokeDecoder(configuration: identity.decoder)
    }

    /// The node's descriptor number (the reader's key and `poll()` entry).
    var fd: Int32 { node.rawValue }

    /// Reads what the node has now into `buffer`.
    func read(into buffer: inout [UInt8]) throws(SystemError) -> Int {
        try node.read(into: &buffer)
    }
}

/// The decode-and-submit half of the reader loop, independent of udev: reads whatever an fd carries
/// (an evdev node, a pty under umockdev, a pipe in tests), feeds each scanner's own decoder and hands
/// completed lines to `submit`. Used only on the reader thread.
final class ScannerReader {
    private let logger: Logger
    private let grab: Bool
    private let submit: @Sendable (Read) -> Void
    /// With `hid.passThrough` on: lines go there, with their keys.
    private let passThrough: PassThroughHandOff?
    private(set) var scanners: [Int32: OpenScanner] = [:]
    /// Read buffer: up to 2048 records per read(2) (a scanner sends a few per key; a pipe in a benchmark
    /// holds up to 64 KiB, so this drains it in one call).
    private var buffer = [UInt8](repeating: 0, count: 2048 * InputEvent.size)

    init(
        logger: Logger, grab: Bool, passThrough: PassThroughHandOff? = nil, submit: @escaping @Sendable (Read) -> Void
    ) {
        self.logger = logger
        self.grab = grab
        self.passThrough = passThrough
        self.submit = submit
    }

    /// Starts reading `node` (already open; made non-blocking here): syncs held keys, grabs when asked.
    func attach(_ node: consuming FileDescriptor, identity: ScannerIdentity) {
        let scanner = OpenScanner(node: node, identity: identity)
        let fd = scanner.fd
        var fields = [("device", identity.name), ("devnode", identity.devnode)]
        do {
            try EvdevNode.setNonBlocking(fd)
        } catch {
            logger.warn("cannot make the scanner fd non-blocking", fields + [("error", error.description)])
        }
        syncHeldKeys(scanner)
        scanners[fd] = scanner
        if grab {
            if scanner.decoder.anyKeyHeld {
                scanner.grabPending = true
                logger.info("scanner has a key held: grabbing once it is released", fields)
            } else {
                takeGrab(scanner)
            }
        }
        fields.append(("product", identity.product))
        fields.append(("layout", identity.decoder.layout.name))
        fields.append(("suffix", identity.decoder.suffix.rawValue))
        fields.append(("grabbed", String(scanner.grabbed)))
        logger.info("scanner attached", fields)
    }

    /// Reads the pressed keys (`EVIOCGKEY`) into the decoder; a failed query means "none held".
    private func syncHeldKeys(_ scanner: OpenScanner) {
        do {
            scanner.decoder.syncHeldKeys(fromBitmap: try EvdevNode.heldKeys(scanner.fd))
        } catch {
            scanner.decoder.syncHeldKeys(fromBitmap: [])
            logger.warn(
                "cannot read the scanner's held keys: assuming none",
                [("device", scanner.identity.name), ("error", error.description)])
        }
    }

    private func takeGrab(_ scanner: OpenScanner) {
        let deferred = scanner.grabPending
        scanner.grabPending = false
        let fields = [("device", scanner.identity.name), ("devnode", scanner.identity.devnode)]
        do {
            try EvdevNode.grab(scanner.fd, true)
            scanner.grabbed = true
            if deferred { logger.info("scanner grabbed: the held key was released", fields) }
        } catch  where error.errno == EBUSY {
            logger.error(
                "scanner is grabbed by another process: its scans go there, not to plings-bridge",
                fields + [("error", error.description), ("fix", "stop the other reader (another plings-bridge?)")])
        } catch {
            // A pipe, FIFO or pty (tests, umockdev without an ioctl handler) answers ENOTTY: read ungrabbed.
            logger.warn(
                "cannot grab the scanner: reading without exclusive access", fields + [("error", error.description)])
        }
    }

    /// Forgets one scanner (unplugged, EOF, I/O error, stop); its node closes with it.
    func detach(fd: Int32, why: String) {
        guard let scanner = scanners.removeValue(forKey: fd) else { return }
        logger.info(
            "scanner removed", [("device", scanner.identity.name), ("devnode", scanner.identity.devnode), ("why", why)])
    }

    func detachAll(why: String) {
        for fd in Array(scanners.keys) { detach(fd: fd, why: why) }
    }

    /// Reads everything `fd` has now (until EAGAIN). Returns false when the device is gone (EOF, ENODEV, EIO)
    /// and has been detached.
    @discardableResult
    func drain(fd: Int32, hangUp: Bool = false, now: () -> Double = MonotonicClock.now) -> Bool {
        guard let scanner = scanners[fd] else { return false }
        while true {
            let count: Int
            do throws(SystemError) {
                count = try scanner.read(into: &buffer)
            } catch  where error.errno == EAGAIN {
                // Drained. A hang-up with nothing to read would wake poll() forever: that node is gone.
                guard hangUp else { return true }
                detach(fd: fd, why: "hang-up")
                return false
            } catch  where error.errno == ENODEV || error.errno == EIO {
                detach(fd: fd, why: error.description)
                return false
            } catch {
                logger.error(
                    "scanner read failed: closing it",
                    [("device", scanner.identity.name), ("error", error.description)])
                detach(fd: fd, why: "read error")
                return false
            }
            if count == 0 {
                detach(fd: fd, why: "end of file")
                return false
            }
            let time = now()
            buffer.withUnsafeBytes { raw in
                let chunk = UnsafeRawBufferPointer(rebasing: raw[0..<count])
                let recording = passThrough != nil
                scanner.parser.parse(chunk) { event in
                    if recording { scanner.keys.record(event) }
                    scanner.decoder.feed(event, now: time) { self.handle($0, scanner) }
                }
            }
            afterEvents(scanner)
            if count < buffer.count && !hangUp { return true }
        }
    }

    private func afterEvents(_ scanner: OpenScanner) {
        if scanner.decoder.needsKeyResync {
            syncHeldKeys(scanner)
        }
        if scanner.grabPending && !scanner.decoder.anyKeyHeld {
            takeGrab(scanner)
        }
    }

    private func handle(_ output: KeystrokeDecoder.Output, _ scanner: OpenScanner) {
        switch output {
        case .line(let line):
            let read = Read(sourceKind: .hid, device: scanner.identity.name, raw: line, time: Date())
            if let passThrough {
                passThrough.hand(read, keys: scanner.keys.finishLine())
            } else {
                submit(read)
            }
        case .discarded(let reason):
            scanner.keys.discardLine()
            logger.warn("scan discarded", [("device", scanner.identity.name), ("reason", Self.describe(reason))])
        }
    }

    static func describe(_ reason: KeystrokeDecoder.DiscardReason) -> String {
        switch reason {
        case .synDropped: return "events dropped by the kernel (SYN_DROPPED): the line may miss keys"
        case .overlong: return "line longer than hid.maxLineLength"
        case .interKeyTimeout: return "no suffix within hid.interKeyTimeout: half a scan"
        }
    }

    /// The nearest inter-key deadline of any scanner (monotonic seconds), or nil.
    func nearestDeadline() -> Double? {
        var nearest: Double?
        for scanner in scanners.values {
            if let deadline = scanner.decoder.pendingDeadline(), deadline < (nearest ?? .infinity) {
                nearest = deadline
            }
        }
        return nearest
    }

    /// Lets every decoder expire a half line whose timeout has passed.
    func tick(now: Double) {
        for scanner in scanners.values {
            if let output = scanner.decoder.tick(now: now) { handle(output, scanner) }
        }
    }
}
