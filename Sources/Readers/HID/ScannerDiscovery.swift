import BridgeCore
import Glibc
import Logging
import Platform

/// Finding scanners for the reader thread: udev enumeration at start, hot-plug from the udev monitor, and
/// opens retried while udev is still applying the rule's group and mode. What it opens it hands to the
/// `ScannerReader`. Used on the reader thread only (libudev objects are not thread-safe).
final class ScannerDiscovery {
    /// An open that failed with EACCES/ENOENT/EPERM, retried until `giveUp`.
    private struct PendingOpen {
        var info: InputDeviceInfo
        var identity: ScannerIdentity
        var next: Double
        var giveUp: Double
        var lastError: SystemError?
    }

    /// How long to keep retrying an open that fails with EACCES/ENOENT (udev may apply the rule's group and
    /// mode just after the add event), and how often.
    static let openRetryWindow = 3.0
    static let openRetryInterval = 0.1

    private let config: BridgeConfig.HID
    private let logger: Logger
    private let reader: ScannerReader
    private var udev: InputUdev?
    private var monitor: InputMonitor?
    private var pending: [PendingOpen] = []

    init(config: BridgeConfig.HID, logger: Logger, reader: ScannerReader) {
        self.config = config
        self.logger = logger
        self.reader = reader
    }

    /// The udev monitor's fd for the `poll()` set (libudev owns it), nil without a monitor.
    var monitorFD: Int32? { monitor?.fd }

    /// When the next open retry is due (monotonic), nil when none is pending.
    var nextRetry: Double? { pending.map(\.next).min() }

    /// Connects to udev, starts the hot-plug monitor and opens the scanners present now.
    func startUdev() {
        do {
            let udev = try InputUdev()
            self.udev = udev
            do {
                monitor = try udev.monitor()
            } catch {
                logger.warn(
                    "no udev monitor: scanners plugged in later will not be seen", [("error", error.description)])
            }
            let scanners = self.scanners(among: udev.inputDevices(), context: "keyboard")
            let names = ScannerMatcher.stableNames(scanners.map(\.device))
            let now = MonotonicClock.now()
            for (device, verdict) in scanners {
                let name = names[device.devnode] ?? device.devnode
                attach(device, name: name, verdict: verdict, event: "scanner found", now: now)
            }
        } catch {
            logger.error("cannot use udev: no scanners will be found", [("error", error.description)])
        }
    }

    /// The scanners among `devices`; every other keyboard is logged (debug) with the reason it is not one.
    private func scanners(
        among devices: [InputDeviceInfo], context: String
    ) -> [(device: InputDeviceInfo, verdict: ScannerMatcher.Verdict)] {
        ScannerMatcher.verdicts(for: devices, rules: config.match).filter { device, verdict in
            if !verdict.matched {
                logger.debug("\(context) is not a scanner", [("devnode", device.devnode), ("reason", verdict.reason)])
            }
            return verdict.matched
        }
    }

    /// Logs the scanner as `event` and opens it with the decoder its matching rule asks for, named as that rule
    /// names it, else by its stable `name`.
    private func attach(
        _ device: InputDeviceInfo, name stableName: String, verdict: ScannerMatcher.Verdict, event: String,
        now: Double
    ) {
        let name = verdict.name ?? stableName
        logger.info(event, [("device", name), ("devnode", device.devnode), ("reason", verdict.reason)])
        let decoder = HIDSource.decoderConfiguration(
            config, logger: logger, layoutName: verdict.layout, variant: verdict.variant)
        open(device, identity: ScannerIdentity(device: device, name: name, decoder: decoder), now: now)
    }

    /// Opens and attaches, or queues a retry on EACCES/ENOENT/EPERM (permissions or node not there yet).
    func open(_ device: InputDeviceInfo, identity: ScannerIdentity, now: Double) {
        do {
            let node = try EvdevNode.open(device.devnode)
            reader.attach(node, identity: identity)
        } catch  where error.errno == EACCES || error.errno == ENOENT || error.errno == EPERM {
            if let index = pending.firstIndex(where: { $0.info.devnode == device.devnode }) {
                pending[index].lastError = error
                pending[index].next = now + Self.openRetryInterval
            } else {
                logger.debug(
                    "cannot open the scanner yet: retrying",
                    [("device", identity.name), ("devnode", device.devnode), ("error", error.description)])
                pending.append(
                    PendingOpen(
                        info: device, identity: identity, next: now + Self.openRetryInterval,
                        giveUp: now + Self.openRetryWindow, lastError: error))
            }
        } catch {
            logger.error(
                "cannot open the scanner",
                [("device", identity.name), ("devnode", device.devnode), ("error", error.description)])
        }
    }

    /// Retries due opens; returns true when one attached or was given up.
    func retryOpens(now: Double) -> Bool {
        guard !pending.isEmpty else { return false }
        var changed = false
        let due = pending.filter { $0.next <= now }
        for item in due {
            pending.removeAll { $0.info.devnode == item.info.devnode }
            if now >= item.giveUp {
                logger.error(
                    "cannot open the scanner: giving up",
                    [
                        ("device", item.identity.name), ("devnode", item.info.devnode),
                        ("error", item.lastError?.description ?? "unknown"),
                        ("fix", "install udev/70-plings-bridge.rules and add the service user to group plings"),
                    ])
                changed = true
                continue
            }
            let before = reader.scanners.count
            open(item.info, identity: item.identity, now: now)
            if let index = pending.firstIndex(where: { $0.info.devnode == item.info.devnode }) {
                pending[index].giveUp = item.giveUp
            }
            if reader.scanners.count != before { changed = true }
        }
        return changed
    }

    /// Handles the monitor fd's `poll()` result; returns true when the scanner set changed.
    func monitorReady(revents: Int16) -> Bool {
        guard let monitor else { return false }
        if revents & Int16(POLLERR | POLLNVAL) != 0 && revents & Int16(POLLIN) == 0 {
            // A broken monitor socket would wake poll() forever: drop it rather than spin.
            logger.error("udev monitor failed: scanners plugged in from now on will not be seen")
            self.monitor = nil
            return false
        }
        var changed = false
        for event in monitor.receive() {
            switch event.action {
            case .add:
                guard let device = event.info,
                    let verdict = scanners(among: [device], context: "keyboard plugged in").first?.verdict
                else { continue }
                let open = reader.scanners.values
                guard !open.contains(where: { $0.identity.devnode == device.devnode }) else { continue }
                let serialTaken = open.contains { $0.identity.serial != nil && $0.identity.serial == device.serial }
                let name = ScannerMatcher.stableName(device, serialIsUnique: !serialTaken)
                let before = reader.scanners.count
                attach(device, name: name, verdict: verdict, event: "scanner plugged in", now: MonotonicClock.now())
                if reader.scanners.count != before { changed = true }
            case .remove:
                pending.removeAll { $0.info.syspath == event.syspath }
                for scanner in reader.scanners.values
                where scanner.identity.syspath == event.syspath
                    || (event.devnode != nil && scanner.identity.devnode == event.devnode)
                {
                    reader.detach(fd: scanner.fd, why: "unplugged")
                    changed = true
                }
            case .other:
                continue
            }
        }
        return changed
    }
}
