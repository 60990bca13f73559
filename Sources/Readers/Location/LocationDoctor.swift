import BridgeCore
import Foundation
import Logging

/// `doctor`'s gpsd finding: reachable, and with a fresh fix, or which fallback applies. The Location module
/// contributes it so `Doctor` knows no libgps.
public enum LocationDoctor {
    /// Asks gpsd, waiting up to 1.5 s for its first report. `logger` gets the connection's own lines (a quiet one
    /// keeps them out of `doctor`'s output).
    public static func check(config location: BridgeConfig.Location, logger: Logger) -> DoctorCheck {
        guard location.enabled else { return DoctorCheck("gpsd", .skip, "location disabled: scans carry no position") }
        guard !location.gpsd.trimmingCharacters(in: .whitespaces).isEmpty else {
            let position = location.fixed.map { "the fixed position \($0.latitude),\($0.longitude) is used" }
            return DoctorCheck(
                "gpsd", .skip, "no gpsd configured (location.gpsd is empty); " + (position ?? "scans carry no position")
            )
        }
        let client = GPSClient(config: location, logger: logger)
        client.start()
        defer { client.stop() }
        _ = client.waitForFirstReport(timeout: 1.5)
        let status = client.status()
        let fallback = location.fixed.map { "the fixed position \($0.latitude),\($0.longitude) is used" }
        guard status.connected else {
            return DoctorCheck(
                "gpsd", fallback == nil ? .warn : .ok,
                "gpsd at \(location.gpsd) not reachable" + (fallback.map { "; \($0)" } ?? ": scans carry no position"),
                fix: fallback == nil
                    ? "start gpsd (systemctl start gpsd) or set location.fixed for a gate that does not move" : "")
        }
        if status.fresh, let lat = status.latitude, let lon = status.longitude {
            let accuracy = status.accuracy.map { String(format: " ±%.0f m", $0) } ?? ""
            return DoctorCheck("gpsd", .ok, "gpsd has a fix: \(lat),\(lon)\(accuracy), mode \(status.mode ?? 0)D")
        }
        // A gate with a fixed position and no receiver: gpsd (installed with the package's Recommends and
        // socket-activated) answers without a fix forever. That is the normal state unless location.gpsd was
        // pointed somewhere on purpose.
        if let fallback, location.gpsd == BridgeConfig().location.gpsd {
            return DoctorCheck(
                "gpsd", .ok, "gpsd at \(location.gpsd) has no fix (no receiver?); \(fallback)",
                fix: "with a receiver, check `plings-bridge gps`; without one, set location.gpsd to \"\" to stop asking"
            )
        }
        return DoctorCheck(
            "gpsd", .warn,
            "gpsd reachable but no fresh fix (mode \(status.mode ?? 0))" + (fallback.map { "; \($0)" } ?? ""),
            fix: "give the receiver a view of the sky; check `plings-bridge gps`")
    }
}
