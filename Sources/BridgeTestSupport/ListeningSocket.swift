import Foundation
import Glibc
import Platform

/// A TCP listener on 127.0.0.1 that accepts and counts connections, answering nothing: a fake proxy (or any
/// peer that must *not* be contacted) for tests that prove no traffic reaches it.
public final class ListeningSocket: Sendable {
    public let port: Int
    private let fd: Int32
    private let accepted = Counter()

    /// The accepted-connection count, shared with the accept thread.
    private final class Counter: Sendable {
        let value = Mutex(0)
    }

    /// A loopback port the system handed out, closed again, for a server under test to listen on.
    public static func freePort() throws -> Int {
        let socket = try ListeningSocket()
        defer { socket.close() }
        return socket.port
    }

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
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
        port = Int(UInt16(bigEndian: address.sin_port))
        let listener = fd
        let counter = accepted
        let thread = Thread {
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return
                }
                counter.value.withLock { $0 += 1 }
                Glibc.close(client)
            }
        }
        thread.name = "listening-socket"
        thread.start()
    }

    /// Connections accepted so far.
    public func acceptedConnections() -> Int { accepted.value.withLock { $0 } }

    /// Stops listening (the accept thread ends).
    public func close() {
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
    }
}
