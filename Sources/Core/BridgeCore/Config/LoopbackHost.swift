import Foundation

/// Loopback addresses by name: where plain-text transports (an `http://` API stand-in, an `mqtt://` broker) are
/// allowed without leaving the box.
public enum LoopbackHost {
    /// `localhost`, `::1` (with or without brackets) and `127.x.y.z`.
    public static func contains(_ host: String) -> Bool {
        let h = host.lowercased().trimmingCharacters(in: ["[", "]"])
        if h == "localhost" || h == "::1" { return true }
        let octets = h.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
