import BridgeCore
import Glibc
import Platform

/// `scanners --calibrate`: the raw keystrokes of one scan, read straight from the scanners' evdev nodes (grabbed,
/// so the code does not also land in a console), before any layout has turned them into characters.
public enum CalibrationCapture {
    public struct Capture: Sendable {
        /// The scanner that typed it (its stable name, else its node).
        public var device: String
        /// Its key events up to and including the release of Enter.
        public var events: [InputEvent]
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Waits until one of `scanners` (node, name) has typed a line ending in Enter, or `deadline` (monotonic)
    /// passes (nil). A node that cannot be opened or grabbed is an error naming it: a running service holds its
    /// scanners, and calibration needs it stopped for the minute it takes.
    public static func capture(_ scanners: [(node: String, name: String)], deadline: Double) throws(Failure) -> Capture?
    {
        // Plain descriptors (closed by the `defer`): they live in an array for one `poll()`.
        var open: [(fd: Int32, name: String, parser: InputEventParser, events: [InputEvent])] = []
        defer {
            for entry in open {
                try? EvdevNode.grab(entry.fd, false)
                close(entry.fd)
            }
        }
        for scanner in scanners {
            let fd = Glibc.open(scanner.node, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else {
                throw Failure(
                    description: "cannot open \(scanner.node) (\(scanner.name)): \(String(cString: strerror(errno)))")
            }
            open.append((fd, scanner.name, InputEventParser(), []))
            do {
                try EvdevNode.grab(fd, true)
            } catch {
                // A pty or pipe in tests has no grab (ENOTTY); a real node another process holds is EBUSY.
                if error.errno == EBUSY {
                    throw Failure(
                        description: "\(scanner.node) (\(scanner.name)) is grabbed by another process (a running "
                            + "plings-bridge?): stop it while calibrating (systemctl stop plings-bridge)")
                }
            }
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let remaining = deadline - MonotonicClock.now()
            if remaining <= 0 { return nil }
            var fds = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(min(remaining, 3600) * 1000) + 1)
            if ready < 0, errno != EINTR { throw Failure(description: "poll: \(String(cString: strerror(errno)))") }
            for index in fds.indices where fds[index].revents != 0 {
                let count = read(open[index].fd, &buffer, buffer.count)
                if count <= 0 {
                    if fds[index].revents & Int16(POLLHUP | POLLERR) != 0 {
                        throw Failure(description: "\(open[index].name) went away (unplugged?)")
                    }
                    continue
                }
                for event in open[index].parser.parse(buffer[..<count]) {
                    open[index].events.append(event)
                    if event.type == Evdev.EV_KEY, event.value == 0,
                        event.code == Evdev.KEY_ENTER || event.code == Evdev.KEY_KPENTER
                    {
                        return Capture(device: open[index].name, events: open[index].events)
                    }
                }
            }
        }
    }
}
