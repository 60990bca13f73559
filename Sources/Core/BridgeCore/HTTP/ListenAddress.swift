/// Where the local HTTP interface listens: `127.0.0.1:8731`, `[::1]:8731`, `0.0.0.0:8731`. A numeric address, so
/// the configuration says exactly which interface is exposed (a name could resolve to another one later).
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// The address without brackets.
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (IPv6 in brackets). The message names what is wrong; the caller adds the key.
    public static func parse(_ text: String) -> Result<ListenAddress, ListenAddressError> {
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return .failure(ListenAddressError("an IPv6 address goes in brackets with a port: [::1]:8731"))
            }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
            guard IPAddressText.isIPv6(host) else {
                return .failure(ListenAddressError("'\(host.prefix(64))' is not a numeric IPv6 address"))
            }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                return .failure(ListenAddressError("needs a port: address:port, e.g. 127.0.0.1:8731"))
            }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            guard IPAddressText.isIPv4(host) else {
                return .failure(
                    ListenAddressError(
                        "'\(host.prefix(64))' is not a numeric IPv4 address (IPv6 goes in brackets: [::1]:8731)"))
            }
        }
        guard let number = Int(port), (1...65_535).contains(number) else {
            return .failure(ListenAddressError("port '\(port.prefix(16))' is not a number from 1 to 65535"))
        }
        return .success(ListenAddress(host: String(host), port: number))
    }

    /// Whether only this box can reach it (127.0.0.0/8 or ::1).
    public var isLoopback: Bool { LoopbackHost.contains(host) && host.lowercased() != "localhost" }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Why a listen address was refused.
public struct ListenAddressError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Numeric IP address syntax (RFC 791 dotted quad; RFC 4291 section 2.2 text forms, without a zone).
public enum IPAddressText {
    public static func isIPv4(_ text: some StringProtocol) -> Bool {
        let parts = String(text).split(separator: Character("."), omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy {
                $0.count <= 3 && !$0.isEmpty && $0.allSatisfy(\.isASCIIDigit) && (Int($0) ?? 256) <= 255
            }
    }

    public static func isIPv6(_ text: some StringProtocol) -> Bool {
        var groups = String(text).split(separator: Character(":"), omittingEmptySubsequences: false).map(String.init)
        guard groups.count >= 3 || text == "::" else { return false }
        var limit = 8
        if let last = groups.last, last.contains(".") {
            guard isIPv4(last) else { return false }
            groups.removeLast()
            limit = 6
        }
        let compressed = text.contains("::")
        if compressed {
            guard text.components(separatedBy: "::").count == 2 else { return false }
        }
        let nonEmpty = groups.filter { !$0.isEmpty }
        for group in nonEmpty where group.count > 4 || !group.allSatisfy(\.isHexDigit) { return false }
        // Empty groups appear only as the "::" (one in the middle, two at an end, three for "::" alone).
        if !compressed, nonEmpty.count != groups.count { return false }
        return compressed ? nonEmpty.count < limit : nonEmpty.count == limit
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
