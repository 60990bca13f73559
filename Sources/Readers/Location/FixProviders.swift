import BridgeCore
import CGPSShim
import Logging

/// Builds the fix seam from the configuration; the one entry point `Bridge` and the CLI call.
public enum LocationSource {
    /// The libgps API version this build was compiled against, for `plings-bridge version`.
    public static var libgpsAPIVersion: String { "\(plings_gps_api_major()).\(plings_gps_api_minor())" }

    /// GPS first, then the fixed location; `NoFixProvider` when location is disabled.
    ///
    /// The returned client (nil when disabled) is not started yet (`start()`); then call `waitForLiveFix(timeout:)` for a
    /// one-shot command, `readTime(now:)` for the read's timestamp, and `stop()` at shutdown. With
    /// `location.gpsd` set to an empty string, no gpsd is asked and only the fixed location is used.
    public static func makeFixProvider(
        config: BridgeConfig, logger: Logger
    ) -> (provider: any FixProvider, client: GPSClient?) {
        let location = config.location
        guard location.enabled else { return (NoFixProvider(), nil) }
        var providers: [any FixProvider] = []
        var client: GPSClient?
        if !location.gpsd.trimmingCharacters(in: .whitespaces).isEmpty {
            let gps = GPSClient(config: location, logger: logger)
            providers.append(gps)
            client = gps
        }
        if let fixed = location.fixed, fixed.isValid { providers.append(FixedFixProvider(fix: fixed)) }
        switch providers.count {
        case 0: return (NoFixProvider(), client)
        case 1: return (providers[0], client)
        default: return (FirstFixProvider(providers), client)
        }
    }
}
