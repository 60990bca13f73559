import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import Location

/// Integration tests: a GPSClient against the real gpsd rig. Serialized: each test owns a gpsd and timing
/// assertions (stale after 1.5 s) should not compete with each other for the two cores.
@Suite(.serialized)
struct GPSClientTests {
    func location(
        _ address: String, maxFixAge: Double = 10, minMode: Int = 2, fixed: LocationFix? = nil,
        timeFromGPS: Bool = false
    ) -> BridgeConfig.Location {
        var config = BridgeConfig().location
        config.gpsd = address
        config.maxFixAge = maxFixAge
        config.minMode = minMode
        config.fixed = fixed
        config.timeFromGPS = timeFromGPS
        return config
    }

    @Test func fixCarriesCoordinatesAndAccuracy() throws {
        let rig = try GPSRig(["--lat", "57.7089", "--lon", "11.9746"])
        defer { rig.stop() }
        let log = CapturedLog()
        let client = GPSClient(config: location(rig.address), logger: log.logger)
        client.start()
        defer { client.stop() }
        #expect(client.waitForFirstReport(timeout: 5))
        try rig.send("error 8")
        #expect(eventually(timeout: 5) { client.currentFix()?.accuracy == 8.0 })
        let fix = try #require(client.currentFix())
        #expect(abs(fix.latitude - 57.7089) < 1e-6)
        #expect(abs(fix.longitude - 11.9746) < 1e-6)
        try rig.send("fix 59.1 18.2")
        #expect(eventually(timeout: 5) { client.currentFix().map { abs($0.latitude - 59.1) < 1e-6 } ?? false })
        let status = client.status()
        #expect(status.connected)
        #expect(status.mode == 3)
        #expect(status.satellitesUsed == 7)
        #expect(status.satellitesVisible == 8)
        #expect(status.fixAge.map { $0 < 2 } ?? false)
        #expect(log.count("connected to gpsd") == 1)
    }

    @Test func noFixMeansNoLocation() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        let client = GPSClient(config: location(rig.address), logger: CapturedLog().logger)
        client.start()
        defer { client.stop() }
        #expect(eventually(timeout: 5) { client.currentFix() != nil })
        try rig.send("nofix")
        // The receiver says it lost the fix: it is dropped at once, not after maxFixAge.
        #expect(eventually(timeout: 5) { client.currentFix() == nil })
        #expect(eventually(timeout: 5) { client.status().mode == 1 })
        #expect(client.status().connected)
    }

    @Test func minModeThreeRejectsTwoDimensionalFixes() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        let client = GPSClient(config: location(rig.address, minMode: 3), logger: CapturedLog().logger)
        client.start()
        defer { client.stop() }
        #expect(eventually(timeout: 5) { client.currentFix() != nil })
        try rig.send("fix2d")
        #expect(eventually(timeout: 5) { client.status().mode == 2 })
        #expect(client.currentFix() == nil)
    }

    @Test func silenceMakesTheFixStale() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        let client = GPSClient(config: location(rig.address, maxFixAge: 1.5), logger: CapturedLog().logger)
        client.start()
        defer { client.stop() }
        #expect(eventually(timeout: 5) { client.currentFix() != nil })
        try rig.send("silence")
        let silentSince = Date()
        #expect(eventually(timeout: 5) { client.currentFix() == nil })
        // Not before maxFixAge minus one 1 Hz cycle (the last TPV may have arrived up to 1 s before `OK`).
        #expect(Date().timeIntervalSince(silentSince) > 0.4)
        #expect(client.status().connected)
        // Stale by its age since arrival or by its TPV time (whichever rule fires first): under load gpsd can
        // deliver a TPV late, so the arrival age may be a little under maxFixAge when the TPV-time rule fires.
        #expect(client.status().fixAge.map { $0 >= 1.0 } ?? false)
    }

    @Test func oneShotUsesOnlyALiveFix() throws {
        let rig = try GPSRig(["--rate", "10"])
        defer { rig.stop() }
        // A streaming receiver: a one-shot client gets a live fix well inside its 1 s wait.
        let quick = GPSClient(config: location(rig.address), logger: CapturedLog().logger)
        quick.start()
        #expect(quick.waitForLiveFix(timeout: 1))
        #expect(quick.currentFix() != nil)
        quick.stop()
    }

    /// Hardening finding 16: gpsd answers a new client's `?POLL` with its last fix for as long as the receiver is
    /// silent, and receivers after a GPS week rollover stamp fixes in the future of the system clock. A one-shot
    /// client must not take that cached fix: only a fix that arrives while it watches counts.
    @Test func oneShotIgnoresGpsdsCachedFixOfASilentReceiverEvenWithAFutureTime() throws {
        let rig = try GPSRig(["--rate", "10"])
        defer { rig.stop() }
        try rig.send("skew 3600")  // the receiver's clock one hour ahead of the system's
        let warm = GPSClient(config: location(rig.address), logger: CapturedLog().logger)
        warm.start()
        #expect(eventually(timeout: 5) { warm.currentFix() != nil })
        warm.stop()
        try rig.send("silence")
        let late = GPSClient(config: location(rig.address, maxFixAge: 10), logger: CapturedLog().logger)
        late.start()
        defer { late.stop() }
        #expect(late.waitForFirstReport(timeout: 1))
        #expect(!late.waitForLiveFix(timeout: 1))
        #expect(late.status().latitude != nil)  // it did get gpsd's cached fix...
        #expect(late.currentFix() == nil)  // ...and did not use it
    }

    @Test func gpsdAbsentAtStartThenStarted() throws {
        let rig = try GPSRig(["--no-gpsd"])
        defer { rig.stop() }
        let log = CapturedLog()
        let client = GPSClient(config: location(rig.address), logger: log.logger)
        client.start()
        defer { client.stop() }
        let started = Date()
        #expect(!client.waitForFirstReport(timeout: 1))
        #expect(Date().timeIntervalSince(started) < 0.5)  // refused: no wait
        #expect(!client.status().connected)
        #expect(client.status().lastError != nil)
        #expect(client.currentFix() == nil)
        // Several failed attempts (0.5 s, 1 s backoff) log one line, not one each.
        #expect(eventually(timeout: 3) { client.status().lastError != nil && Date().timeIntervalSince(started) > 1.6 })
        #expect(log.count("gpsd not reachable") == 1)
        try rig.send("start-gpsd")
        #expect(eventually(timeout: 15) { client.currentFix() != nil })
        #expect(client.status().connected)
        #expect(log.count("connected to gpsd") == 1)
    }

    @Test func gpsdKilledAndRestartedWhileRunning() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        let log = CapturedLog()
        let client = GPSClient(config: location(rig.address, maxFixAge: 30), logger: log.logger)
        client.start()
        defer { client.stop() }
        #expect(eventually(timeout: 5) { client.currentFix() != nil })
        try rig.send("kill-gpsd")
        #expect(eventually(timeout: 3) { !client.status().connected })
        #expect(eventually(timeout: 3) { log.count("lost the connection") == 1 })
        try rig.send("fix 58.0 16.0")  // written while gpsd is down; flushed by start-gpsd
        try rig.send("start-gpsd")
        #expect(eventually(timeout: 15) { client.currentFix().map { abs($0.latitude - 58.0) < 1e-6 } ?? false })
        #expect(client.status().connected)
        #expect(log.count("connected to gpsd") == 2)
        #expect(log.count("lost the connection") == 1)
    }

    @Test func stopReturnsQuicklyWhileBlockedInRead() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        try rig.send("silence")
        let client = GPSClient(config: location(rig.address), logger: CapturedLog().logger)
        client.start()
        #expect(eventually(timeout: 5) { client.status().connected })
        let before = Date()
        client.stop()
        #expect(Date().timeIntervalSince(before) < 1.0)
        #expect(eventually(timeout: 2) { !client.status().connected })
    }

    @Test func fixedLocationWithAndWithoutGpsd() throws {
        let fixed = LocationFix(latitude: 10.5, longitude: 20.5, accuracy: 3)
        var config = BridgeConfig()
        // Without gpsd: the fixed gate position.
        config.location = location("127.0.0.1:1", fixed: fixed)
        let absent = LocationSource.makeFixProvider(config: config, logger: CapturedLog().logger)
        absent.client?.start()
        defer { absent.client?.stop() }
        #expect(absent.client != nil)
        #expect(absent.provider.currentFix() == fixed)

        // With gpsd and a fresh fix: GPS wins; when the receiver loses its fix: back to the gate position.
        let rig = try GPSRig(["--lat", "59.5", "--lon", "18.5"])
        defer { rig.stop() }
        config.location = location(rig.address, fixed: fixed)
        let both = LocationSource.makeFixProvider(config: config, logger: CapturedLog().logger)
        both.client?.start()
        defer { both.client?.stop() }
        #expect(eventually(timeout: 5) { both.provider.currentFix().map { abs($0.latitude - 59.5) < 1e-6 } ?? false })
        try rig.send("nofix")
        #expect(eventually(timeout: 5) { both.provider.currentFix() == fixed })
    }

    @Test func locationDisabled() throws {
        var config = BridgeConfig()
        config.location.enabled = false
        config.location.fixed = LocationFix(latitude: 1, longitude: 2)
        let made = LocationSource.makeFixProvider(config: config, logger: CapturedLog().logger)
        #expect(made.client == nil)
        #expect(made.provider.currentFix() == nil)
    }

    @Test func clockSkewIsDetectedAndLoggedOnce() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        try rig.send("skew 30")
        let log = CapturedLog()
        let client = GPSClient(config: location(rig.address, timeFromGPS: true), logger: log.logger)
        client.start()
        defer { client.stop() }
        #expect(eventually(timeout: 5) { client.status().clockUnsynchronised })
        let offset = try #require(client.status().clockOffset)
        #expect(abs(offset + 30) < 1.5)  // system clock is 30 s behind GPS
        // timeFromGPS: the read time is GPS time, 30 s ahead of the system clock.
        let now = Date()
        #expect(abs(client.readTime(now: now).timeIntervalSince(now) - 30) < 1.5)
        // A skewed GPS time in the future still gives a fix to attach.
        #expect(client.currentFix() != nil)
        #expect(eventually(timeout: 5) { client.status().fixAge.map { $0 < 0.5 } ?? false })
        try rig.send("fix 59.0 18.0")  // more live fixes: still one log line
        #expect(eventually(timeout: 5) { client.currentFix().map { abs($0.latitude - 59.0) < 1e-6 } ?? false })
        #expect(log.count("system clock disagrees") == 1)
    }

    @Test func synchronisedClockKeepsTheSystemTime() throws {
        let rig = try GPSRig()
        defer { rig.stop() }
        let client = GPSClient(config: location(rig.address, timeFromGPS: true), logger: CapturedLog().logger)
        client.start()
        defer { client.stop() }
        #expect(eventually(timeout: 5) { client.status().clockOffset != nil })
        #expect(!client.status().clockUnsynchronised)
        let now = Date()
        #expect(client.readTime(now: now) == now)
    }
}
