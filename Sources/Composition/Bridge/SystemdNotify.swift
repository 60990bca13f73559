import Foundation
import Glibc
import Platform

/// `sd_notify` in a few lines: one datagram to `$NOTIFY_SOCKET` (a path, or `@name` for the abstract
/// namespace). Without systemd (no variable) every call is a no-op. libsystemd is not linked for this.
public struct SystemdNotifier: Sendable {
    private let socketPath: String?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        // An unsigned count of microseconds, as sd_watchdog_enabled(3) reads it; anything else (`inf`, `-1`,
        // `1e300`) is not a watchdog request. Values over 9e15 us (285 years) cannot be timed and are ignored.
        // The conversions are written out: an unapplied `.map(Double.init)` on a UInt64 picks
        // `Double(bitPattern:)` (6000000 became 3e-317), which made the watchdog ping in a busy loop.
        if let usec = environment["WATCHDOG_USEC"].flatMap({ UInt64($0) }).map({ Double($0) }), usec > 0,
            usec <= 9e15, environment["WATCHDOG_PID"].flatMap({ Int32($0) }).map({ $0 == getpid() }) ?? true
        {
            watchdogInterval = usec / 1_000_000
        } else {
            watchdogInterval = nil
        }
    }

    /// The watchdog period systemd asked for (seconds), when `WatchdogSec=` is set.
    public let watchdogInterval: Double?

    public var isActive: Bool { socketPath != nil }

    /// Sends `state` (e.g. "READY=1\nSTATUS=...") and returns whether it was delivered.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        let raw = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard raw >= 0 else { return false }
        let socket = FileDescriptor(adopting: raw)  // closed when it goes out of scope
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        let abstract = pathBytes.first == UInt8(ascii: "@")
        if abstract { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in pathBytes.enumerated() { raw[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (abstract ? 0 : 1))
        let payload = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                payload.withUnsafeBytes { bytes in
                    sendto(socket.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        return sent == payload.count
    }
}
