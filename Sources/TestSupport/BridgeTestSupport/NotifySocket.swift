import Foundation
import Glibc

/// A datagram socket standing in for systemd's notify socket (`NOTIFY_SOCKET`): what the service tells systemd
/// (`READY=1`, `RELOADING=1`, `WATCHDOG=1`, `STOPPING=1`), for the tests and the start-time benchmark.
public final class NotifySocket {
    public let fd: Int32
    public let path: String

    public init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else { throw RigError("bind notify socket: errno \(errno)") }
    }

    /// The next datagram, waiting at most `timeout` seconds (poll, no sleeping).
    public func receive(timeout: Double) -> String? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }

    deinit { close(fd) }
}
