import Foundation
import Glibc
import Logging
import Platform

/// What one kind of device node brings to `DeviceNodeLoop`: which udev devices it reads (a HID POS scanner's
/// hidraw node, a serial scanner's tty), how a node is opened and read, and what happens around each wake-up.
/// Everything else (udev enumeration and hot-plug, the `poll()`, open retries, closing, the log lines) is the
/// loop's, the same for every kind.
public protocol DeviceNodeKind: AnyObject {
    associatedtype Node: AnyObject
    /// A device this kind wants open, with what it learnt deciding so (a HID POS scanner's layout).
    associatedtype Candidate

    /// "serial", "hidpos": the prefix of the loop's own log lines.
    var label: String { get }
    /// "serial scanner", "HID POS scanner": in the lines about one node.
    var noun: String { get }
    var subsystem: String { get }
    /// What `UdevContext` reads of each device's parents (`[:]`: nothing).
    var parents: [String: [String]] { get }
    /// How often and how many times an open refused for a reason that may pass (udev not done with the node's
    /// group yet, ModemManager probing a port) is tried again.
    var retryInterval: Double { get }
    var maxAttempts: Int { get }

    /// What `device` is to this kind, or nil to leave it alone (not a scanner, no rule names it).
    func candidate(_ device: UdevDevice) -> Candidate?
    func devnode(of candidate: Candidate) -> String
    /// Opens the node (non-blocking) and names the fields of its "attached" line; an error's errno decides
    /// whether the open is tried again.
    func open(_ candidate: Candidate) throws(SystemError) -> (node: Node, fields: [(String, String)])
    func fd(of node: Node) -> Int32
    /// Reads what the node has; a reason to close it (unplugged, an error), or nil.
    func read(_ node: Node, revents: Int16, now: Double) -> String?
    /// Time-based work (a code left unfinished past its deadline), and that deadline.
    func tick(_ node: Node, now: Double)
    func deadline(of node: Node) -> Double?
    /// After each wake-up: the kind's own work (feedback to write on `nodes`), and nodes handed in from elsewhere
    /// (the benchmarks' seams) to read from now on.
    func afterWake(nodes: [String: Node], now: Double) -> [(devnode: String, node: Node)]
    /// What to do about an open that failed for good.
    func fix(for errno: Int32) -> String
    /// The set of open nodes changed (for the source's status).
    func nodesChanged(_ nodes: [String: Node])
}

/// A reader thread's loop over device nodes of one kind: one `poll()` over every open node, the udev monitor and
/// the wake pipe. Its timeout is the nearest unfinished code's deadline or a pending open retry; otherwise it
/// sleeps until something happens: no busy polling. Used on that thread only (libudev objects are not
/// thread-safe).
public final class DeviceNodeLoop<Kind: DeviceNodeKind> {
    private struct Retry {
        var candidate: Kind.Candidate
        var at: Double
        var attempts: Int
    }

    private let kind: Kind
    private let reader: ReaderControl
    private let logger: Logger
    private var nodes: [String: Kind.Node] = [:]
    private var retries: [String: Retry] = [:]

    public init(_ kind: Kind, reader: ReaderControl, logger: Logger) {
        self.kind = kind
        self.reader = reader
        self.logger = logger
    }

    /// Runs until the source stops; `ready` is called once the nodes present at start are open. `udev: false`
    /// (benchmarks) reads only the nodes handed in.
    public func run(udev useUdev: Bool, ready: () -> Void) {
        var monitor: UdevDeviceMonitor?
        var udev: UdevContext?
        do {
            if useUdev {
                let context = try UdevContext()
                udev = context
                monitor = try context.monitor(subsystem: kind.subsystem, parents: kind.parents)
            }
        } catch {
            logger.error("\(kind.label): udev unavailable: hot-plug is not followed", [("error", error.description)])
        }
        for device in udev?.devices(subsystem: kind.subsystem, parents: kind.parents) ?? [] {
            consider(device, now: MonotonicClock.now())
        }
        kind.nodesChanged(nodes)
        ready()
        while !reader.isStopping {
            var fds = [pollfd(fd: reader.wakePipe?.readFD ?? -1, events: Int16(POLLIN), revents: 0)]
            fds.append(pollfd(fd: monitor?.fd ?? -1, events: Int16(POLLIN), revents: 0))
            let order = Array(nodes)
            for (_, node) in order { fds.append(pollfd(fd: kind.fd(of: node), events: Int16(POLLIN), revents: 0)) }
            let ready: Int32
            do {
                // Waiting for a code, a device or a stop: the watchdog does not count it as work.
                let timeout = pollTimeout(now: MonotonicClock.now())
                ready = try systemCall("poll") { WorkerActivity.waiting { poll(&fds, nfds_t(fds.count), timeout) } }
            } catch {
                logger.error("\(kind.label): poll failed", [("error", error.description)])
                MonotonicClock.sleep(seconds: 0.1)  // never spin on a persistent poll error (ENOMEM)
                continue
            }
            let now = MonotonicClock.now()
            if ready > 0 {
                if fds[0].revents != 0 { reader.wakePipe?.drain() }
                if fds[1].revents != 0, let monitor {
                    for event in monitor.receive() { hotplug(event, now: now) }
                }
                for (index, (devnode, node)) in order.enumerated() where fds[index + 2].revents != 0 {
                    if let why = kind.read(node, revents: fds[index + 2].revents, now: now) { close(devnode, why: why) }
                }
            }
            for node in nodes.values { kind.tick(node, now: now) }
            let handed = kind.afterWake(nodes: nodes, now: now)
            for (devnode, node) in handed { nodes[devnode] = node }
            if !handed.isEmpty { kind.nodesChanged(nodes) }
            for retry in retries.values where retry.at <= now {
                open(retry.candidate, now: now, attempt: retry.attempts + 1)
            }
        }
        for devnode in Array(nodes.keys) { close(devnode, why: "stopping") }
    }

    /// Milliseconds until the nearest deadline or open retry; -1 (sleep until something happens) when none.
    private func pollTimeout(now: Double) -> Int32 {
        var nearest = Double.infinity
        for node in nodes.values { nearest = min(nearest, kind.deadline(of: node) ?? .infinity) }
        for retry in retries.values { nearest = min(nearest, retry.at) }
        return reader.pollTimeout(until: nearest, now: now)
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
        kind.nodesChanged(nodes)
    }

    private func consider(_ device: UdevDevice, now: Double) {
        if let devnode = device.devnode, nodes[devnode] != nil { return }
        guard let candidate = kind.candidate(device), nodes[kind.devnode(of: candidate)] == nil else { return }
        open(candidate, now: now, attempt: 1)
    }

    private func open(_ candidate: Kind.Candidate, now: Double, attempt: Int) {
        let devnode = kind.devnode(of: candidate)
        do {
            let (node, fields) = try kind.open(candidate)
            retries[devnode] = nil
            nodes[devnode] = node
            logger.info("\(kind.noun) attached", fields)
        } catch {
            let retryable = [EACCES, EPERM, ENOENT, EBUSY, EAGAIN].contains(error.errno)
            if retryable, attempt < kind.maxAttempts {
                if attempt == 1 {
                    logger.warn(
                        "\(kind.noun) not openable yet; retrying", [("devnode", devnode), ("error", error.description)])
                }
                retries[devnode] = Retry(candidate: candidate, at: now + kind.retryInterval, attempts: attempt)
            } else {
                retries[devnode] = nil
                logger.error(
                    "\(kind.noun) cannot be opened; re-plug it once fixed",
                    [("devnode", devnode), ("error", error.description), ("fix", kind.fix(for: error.errno))])
            }
        }
        kind.nodesChanged(nodes)
    }

    private func close(_ devnode: String, why: String) {
        guard nodes.removeValue(forKey: devnode) != nil else { return }
        logger.info("\(kind.noun) detached", [("devnode", devnode), ("why", why)])
        kind.nodesChanged(nodes)
    }
}
