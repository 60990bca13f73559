import BridgeCore
import Foundation
import Location
import Logging
import Platform

/// The location in force, swapped by a reload: `location` is reloadable because gates are moved (a new
/// `location.fixed`) and receivers are added or removed (a new `location.gpsd`).
///
/// The pipeline asks it for the fix (`FixProvider`) and the read time; the group starts and stops it. A reload
/// that changes only the fixed position keeps the running gpsd client; one that changes gpsd's keys starts the
/// new client before the old one stops, so reads in between still get a fix.
public final class LocationSlot: Service, FixProvider {
    public let name = "location"
    private struct Current {
        var location: BridgeConfig.Location
        var provider: any FixProvider
        var client: GPSClient?
        var started = false
    }
    private let current: Mutex<Current>
    private let logger: Logger

    public init(config: BridgeConfig, logger: Logger) {
        let (provider, client) = LocationSource.makeFixProvider(config: config, logger: logger)
        self.current = Mutex(Current(location: config.location, provider: provider, client: client))
        self.logger = logger
    }

    /// The gpsd client in use (nil when location is off or only a fixed position is configured).
    public var client: GPSClient? { current.withLock { $0.client } }

    public func start() {
        current.withLock { c in
            c.started = true
            return c.client
        }?.start()
    }

    public func stop(deadline: Double) {
        current.withLock { c in
            c.started = false
            return c.client
        }?.stop(deadline: deadline)
    }

    public func currentFix() -> LocationFix? { current.withLock { $0.provider }.currentFix() }

    /// A read's timestamp (`location.timeFromGPS`), from the client in use.
    public func readTime(now: Date) -> Date { client?.readTime(now: now) ?? now }

    /// Applies a reloaded `location`; returns whether anything changed.
    @discardableResult
    public func apply(_ config: BridgeConfig) -> Bool {
        let fresh = config.location
        let old = current.withLock { $0.location }
        guard fresh != old else { return false }
        var gpsdKeys = fresh
        gpsdKeys.fixed = old.fixed
        if gpsdKeys == old, let client = self.client {
            // Only the fixed position moved: the running client stays.
            let provider = LocationSlot.provider(client: client, fixed: fresh.enabled ? fresh.fixed : nil)
            current.withLock {
                $0.location = fresh
                $0.provider = provider
            }
            return true
        }
        let (provider, client) = LocationSource.makeFixProvider(config: config, logger: logger)
        let started = current.withLock { $0.started }
        if started { client?.start() }
        let previous = current.withLock { c -> GPSClient? in
            defer {
                c.location = fresh
                c.provider = provider
                c.client = client
            }
            return c.client
        }
        if started { previous?.stop(deadline: MonotonicClock.deadline(after: 1)) }
        return true
    }

    /// GPS first, then the fixed position (as `LocationSource.makeFixProvider` composes them).
    static func provider(client: GPSClient, fixed: LocationFix?) -> any FixProvider {
        guard let fixed, fixed.isValid else { return client }
        return FirstFixProvider([client, FixedFixProvider(fix: fixed)])
    }

    /// For `status`: where positions come from (`source`), the gpsd asked, and the fix a read would get now with
    /// its origin (`gps` or `fixed`), or null.
    public func snapshot() -> JSONValue {
        let (location, client) = current.withLock { ($0.location, $0.client) }
        guard location.enabled else {
            return .object([("source", .string("disabled")), ("fix", .null)])
        }
        var sources: [String] = []
        if client != nil { sources.append("gpsd") }
        if location.fixed?.isValid == true { sources.append("fixed") }
        var fix: JSONValue = .null
        let status = client?.status()
        if let gps = client?.currentFix() {
            fix = LocationSlot.json(gps, from: "gps", age: status?.fixAge)
        } else if let fixed = location.fixed, fixed.isValid {
            fix = LocationSlot.json(fixed, from: "fixed", age: nil)
        }
        var members: [(String, JSONValue)] = [
            ("source", .string(sources.isEmpty ? "none" : sources.joined(separator: ", else "))),
            ("fix", fix),
        ]
        if let status {
            members.append(("gpsd", .string(location.gpsd)))
            members.append(("gpsdConnected", .bool(status.connected)))
        }
        return .object(members)
    }

    static func json(_ fix: LocationFix, from origin: String, age: Double?) -> JSONValue {
        .object([
            ("from", .string(origin)), ("latitude", .number(fix.latitude)), ("longitude", .number(fix.longitude)),
            ("accuracy", fix.accuracy.map(JSONValue.number) ?? .null),
            ("age", age.map { .number(($0 * 10).rounded() / 10) } ?? .null),
        ])
    }
}
