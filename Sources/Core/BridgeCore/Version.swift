/// The release version, shown by `plings-bridge version` and sent as `User-Agent: plings-bridge/<version>`.
public enum BridgeVersion {
    public static let current = "0.2.0"
    public static var userAgent: String { "plings-bridge/\(current)" }
}
