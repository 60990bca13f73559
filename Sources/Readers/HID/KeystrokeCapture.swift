import BridgeCore
import Glibc
import Platform

/// Raw keystrokes straight from scanners' evdev nodes, grabbed (so a code does not also land in a console), before
/// any layout has turned them into characters: one scan at a time, up to its Enter. For `scanners --calibrate` and
/// `scanners --test`; the nodes stay open and grabbed between scans, so nothing typed in between is lost.
public final class KeystrokeCapture {
    public struct Line: Sendable {
        /// The scanner that typed it (its stable name, else its node).
        public var device: String
        /// Its key events up to and including the release of Enter.
        public var events: [InputEvent]

        /// From the first key press to Enter's release, by the kernel's event times (ms); nil without a press.
        public var typingMilliseconds: Double? {
            guard let first = events.first(where: { $0.type == Evdev.EV_KEY && $0.value == 1 }), let last = events.last
            else { return nil }
            return (last.time - first.time) * 1000
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Plain descriptors in an array for one `poll()`, closed by `close()` or `deinit`.
    private var open: [(fd: Int32, name: String, parser: InputEventParser, events: [InputEvent])] = []

    /// Opens and grabs every node. A node another process holds is an error naming it: a running service holds
    /// its scanners, and calibrating or testing needs it stopped for the minute it takes.
    public init(_ scanners: [(node: String, name: String)]) throws(Failure) {
        for scanner in scanners {
            let fd = Glibc.open(scanner.node, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else {
                let why = String(cString: strerror(errno))
                close()
                throw Failure(description: "cannot open \(scanner.node) (\(scanner.name)): \(why)")
            }
            open.append((fd, scanner.name, InputEventParser(), []))
            do {
                try EvdevNode.grab(fd, true)
            } catch {
                // A pty or pipe in tests has no grab (ENOTTY); a real node another process holds is EBUSY.
                if error.errno == EBUSY {
                    close()
                    throw Failure(
                        description: "\(scanner.node) (\(scanner.name)) is grabbed by another process (a running "
                            + "plings-bridge?): stop it meanwhile (systemctl stop plings-bridge)")
                }
            }
        }
    }

    deinit { close() }

    /// Releases the grabs and closes the nodes.
    public func close() {
        for entry in open {
            try? EvdevNode.grab(entry.fd, false)
            Glibc.close(entry.fd)
        }
        open.removeAll()
    }

    /// Waits until one of the scanners has typed a line ending in Enter, or `deadline` (monotonic) passes (nil).
    /// Keys typed after an Enter in the same read stay for the next call.
    public func nextLine(deadline: Double) throws(Failure) -> Line? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let line = takeLine() { return line }
            let remaining = deadline - MonotonicClock.now()
            if remaining <= 0 { return nil }
            var fds = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(min(remaining, 3600) * 1000) + 1)
            if ready < 0, errno != EINTR { throw Failure(description: "poll: \(String(cString: strerror(errno)))") }
            for index in fds.indices where fds[index].revents != 0 {
                let count = read(open[index].fd, &buffer, buffer.count)
                if count > 0 {
                    open[index].events += open[index].parser.parse(buffer[..<count])
                } else if fds[index].revents & Int16(POLLHUP | POLLERR) != 0 {
                    throw Failure(description: "\(open[index].name) went away (unplugged?)")
                }
            }
        }
    }

    /// The first complete line any scanner has typed so far, taken out of its events.
    private func takeLine() -> Line? {
        for index in open.indices {
            guard
                let end = open[index].events.firstIndex(where: {
                    $0.type == Evdev.EV_KEY && $0.value == 0
                        && ($0.code == Evdev.KEY_ENTER || $0.code == Evdev.KEY_KPENTER)
                })
            else { continue }
            let line = Array(open[index].events[...end])
            open[index].events.removeFirst(end + 1)
            return Line(device: open[index].name, events: line)
        }
        return nil
    }
}
