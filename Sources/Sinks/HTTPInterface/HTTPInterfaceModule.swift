import BridgeCore
import Foundation
import SinkKit

extension ScanSinkModule {
    /// The local HTTP interface (`http` section): the bench page, the scan feed, status, metrics and health.
    public static let http = ScanSinkModule(
        name: "http", statusKey: "http", configSection: HTTPConfig.self,
        make: { HTTPInterfaceSink(context: $0) }, doctor: { [HTTPDoctor.check($0)] })
}

/// `doctor`'s listener check: is something answering on `http.listen`, and is it this service?
enum HTTPDoctor {
    static func check(_ context: SinkDoctorContext) -> DoctorCheck {
        let http = context.configuration.config.http
        guard let address = http.address else {
            return DoctorCheck("http", .skip, "http.listen is empty: no local interface")
        }
        let scheme = http.certFile == nil ? "http" : "https"
        let url = "\(scheme)://\(address)/"
        switch probe(address, tls: http.certFile != nil) {
        case .answered(let statusLine) where statusLine.contains(" 200 "):
            return DoctorCheck("http", .ok, "\(url) answers (/healthz)")
        case .answered(let statusLine) where statusLine.contains(" 401 ") || statusLine.contains(" 403 "):
            return DoctorCheck("http", .ok, "\(url) answers and asks for the token (/healthz)")
        case .answered(let statusLine):
            return DoctorCheck(
                "http", .warn, "\(url) answers /healthz with '\(statusLine.prefix(80))', not plings-bridge's 200",
                fix: "another program may hold the port: choose another http.listen")
        case .accepted:
            return DoctorCheck("http", .ok, "\(url) accepts connections (HTTPS; not probed further)")
        case .refused(let reason):
            return DoctorCheck(
                "http", .warn, "nothing answers on \(url): \(reason)",
                fix: "start the service (systemctl start plings-bridge); if it runs, its log says why it cannot listen")
        }
    }

    enum Probe {
        case answered(String)
        case accepted
        case refused(String)
    }

    /// A TCP connection and, for plain HTTP, `GET /healthz`; two seconds at most.
    static func probe(_ address: ListenAddress, tls: Bool) -> Probe {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST
        var list: UnsafeMutablePointer<addrinfo>?
        // 0.0.0.0 and :: listen everywhere; loopback reaches them.
        let host = address.host == "0.0.0.0" ? "127.0.0.1" : address.host == "::" ? "::1" : address.host
        guard getaddrinfo(host, String(address.port), &hints, &list) == 0, let info = list else {
            return .refused("not an address")
        }
        defer { freeaddrinfo(list) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .refused(String(cString: strerror(errno))) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            return .refused(String(cString: strerror(errno)))
        }
        if tls { return .accepted }
        let request = Array("GET /healthz HTTP/1.0\r\nHost: \(address)\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            return .refused(String(cString: strerror(errno)))
        }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return .refused("the connection closed without an answer") }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return .answered(String(text.prefix { $0 != "\r" && $0 != "\n" }))
    }
}
