import BridgeCore
import Foundation
import Location
import Logging
import Platform

extension CLI {
    /// `plings-bridge gps [--json] [--gpsd HOST:PORT]`: asks gpsd once (waiting up to ~2 s for its first
    /// report) and prints the connection, the last fix, satellites and the clock offset. gpsd absent is a
    /// result (connected false), not a failure: exit 0.
    func gps(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("gps takes no arguments") }
        let settings = try settings(args)
        let location = settings.config.location
        guard GPSDAddress.parse(location.gpsd) != nil else {
            throw CommandFailure.config("location.gpsd must be HOST:PORT, got '\(location.gpsd)'")
        }
        // The connection's state lines would only repeat what this command prints; keep errors (and debug).
        let client = GPSClient(config: location, logger: quietLogger())
        client.start()
        let started = MonotonicClock.now()
        if client.waitForFirstReport(timeout: 2) {
            // gpsd answers ?POLL; at once with its cached fix; a live one (next receiver cycle, <= 1 s at 1 Hz)
            // is what tells the clock offset. Within the same ~2 s budget.
            let left = 2 - (MonotonicClock.now() - started)
            if client.status().mode.map({ $0 >= 2 }) ?? false, left > 0 {
                _ = client.waitForLiveFix(timeout: left)
            }
        }
        let status = client.status()
        client.stop()
        if args.json {
            print(GPSCommandOutput.json(status).encoded())
        } else {
            for line in GPSCommandOutput.human(status, gpsd: location.gpsd) { show(line) }
        }
        return 0
    }
}

/// The two renderings of `plings-bridge gps`.
enum GPSCommandOutput {
    /// The shape of docs/contracts.md, "Command line"; unknown values are null. `fresh`, `clockUnsynchronised` and
    /// `error` are extras.
    static func json(_ s: GPSStatus) -> JSONValue {
        func number(_ v: Double?) -> JSONValue { v.map { .number($0) } ?? .null }
        func integer(_ v: Int?) -> JSONValue { v.map { .integer($0) } ?? .null }
        return .object([
            ("connected", .bool(s.connected)),
            ("mode", integer(s.mode)),
            ("latitude", number(s.latitude)),
            ("longitude", number(s.longitude)),
            ("accuracy", number(s.accuracy)),
            ("fixAge", number(s.fixAge.map { ($0 * 1000).rounded() / 1000 })),
            ("satellitesUsed", integer(s.satellitesUsed)),
            ("satellitesVisible", integer(s.satellitesVisible)),
            ("clockOffset", number(s.clockOffset.map { ($0 * 1000).rounded() / 1000 })),
            ("fresh", .bool(s.fresh)),
            ("clockUnsynchronised", .bool(s.clockUnsynchronised)),
            ("error", s.lastError.map { .string($0) } ?? .null),
        ])
    }

    static func human(_ s: GPSStatus, gpsd: String) -> [String] {
        guard s.connected || s.mode != nil else {
            return [
                "gpsd: not reachable at \(gpsd)" + (s.lastError.map { " (\($0))" } ?? ""),
                "  scans carry the fixed location if one is configured, else no position",
            ]
        }
        var lines = ["gpsd: connected to \(gpsd)" + (s.connected ? "" : " (connection lost)")]
        let modes = [0: "not seen", 1: "no fix", 2: "2D fix", 3: "3D fix"]
        lines.append("mode: " + (s.mode.map { modes[$0] ?? "\($0)" } ?? "no report yet"))
        if let lat = s.latitude, let lon = s.longitude {
            var position = String(format: "position: %.7f, %.7f", lat, lon)
            if let accuracy = s.accuracy { position += String(format: " ±%.1f m", accuracy) }
            lines.append(position)
            if let age = s.fixAge {
                lines.append(String(format: "fix age: %.1f s", age) + (s.fresh ? " (fresh)" : " (stale: not attached)"))
            }
        } else {
            lines.append("position: none")
        }
        if let used = s.satellitesUsed, let visible = s.satellitesVisible {
            lines.append("satellites: \(used) used of \(visible) visible")
        }
        if let offset = s.clockOffset {
            lines.append(
                String(format: "clock offset: %+.3f s (system minus GPS)", offset)
                    + (s.clockUnsynchronised ? " - system clock unsynchronised" : ""))
        }
        return lines
    }
}
