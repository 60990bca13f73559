import Foundation
import Glibc
import Platform

/// A TCP listener on 127.0.0.1 that accepts and counts connections, closing each at once: a fake proxy (or any
/// peer that must *not* be contacted) for tests that prove no traffic reaches it, or a broker's port that takes
/// each connection attempt and drops it, so a test sees when a client tries and what it sent first
/// (`connections`, with `reading`).
public final class ListeningSocket: Sendable {
    public let port: Int
    private let fd: Int32
    private let accepted = Counter()

    /// When each connection was accepted (`MonotonicClock`) and its first bytes, shared with the accept thread.
    private final class Counter: Sendable {
        let value = Mutex<[(at: Double, first: [UInt8])]>([])
    }

    /// A loopback port the system handed out, closed again, for a server under test to listen on.
    public static func freePort() throws -> Int {
        let socket = try ListeningSocket()
        defer { socket.close() }
        return socket.port
    }

    /// On `port` (0: one the system picks). `reading`: each connection's first bytes (up to 1 KiB, within 1 s)
    /// are read before it is closed.
    public init(port: Int = 0, reading: Bool = false) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        self.fd = fd
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        let listener = fd
        let counter = accepted
        let thread = Thread {
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return
                }
                let at = MonotonicClock.now()
                var first: [UInt8] = []
                if reading {
                    var limit = timeval(tv_sec: 1, tv_usec: 0)
                    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
                    var buffer = [UInt8](repeating: 0, count: 1024)
                    let got = recv(client, &buffer, buffer.count, 0)
                    if got > 0 { first = Array(buffer[0..<got]) }
                }
                counter.value.withLock { $0.append((at, first)) }
                Glibc.close(client)
            }
        }
        thread.name = "listening-socket"
        thread.start()
    }

    /// Connections accepted so far.
    public func acceptedConnections() -> Int { accepted.value.withLock { $0.count } }

    /// Each connection so far: when it was accepted (`MonotonicClock` seconds) and what it sent first.
    public func connections() -> [(at: Double, first: [UInt8])] { accepted.value.withLock { $0 } }

    /// Stops listening (the accept thread ends).
    public func close() {
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
    }
}
