import Foundation
import Testing

@testable import BridgeCore

struct FixPolicyTests {
    let now = 1_790_000_000.0  // 2026-09-21
    let policy = FixPolicy(maxFixAge: 10, minMode: 2)

    func tpv(
        mode: Int? = 3, lat: Double? = 59.3, lon: Double? = 18.1, eph: Double? = 5, time: Double?,
        replayed: Bool = false
    ) -> GPSReport {
        GPSReport(kind: .tpv, mode: mode, latitude: lat, longitude: lon, eph: eph, time: time, replayed: replayed)
    }

    func fix(gpsTime: Double, receivedAt: Double = 100, replayed: Bool = false) -> GPSFix {
        GPSFix(
            latitude: 1, longitude: 2, accuracy: 3, mode: 3, gpsTime: gpsTime, receivedAt: receivedAt,
            replayed: replayed)
    }

    @Test func aGoodTPVBecomesAFixStampedWithTheReceiveTime() {
        let update = policy.update(for: tpv(time: now), receivedAt: 42)
        #expect(
            update
                == .fix(
                    GPSFix(
                        latitude: 59.3, longitude: 18.1, accuracy: 5, mode: 3, gpsTime: now,
                        receivedAt: 42)))
    }

    @Test func tpvsWithoutTimeOrPositionAreIgnored() {
        #expect(policy.update(for: tpv(time: nil), receivedAt: 1) == .ignore)
        #expect(policy.update(for: tpv(lat: nil, time: now), receivedAt: 1) == .ignore)
        #expect(policy.update(for: tpv(mode: nil, time: now), receivedAt: 1) == .ignore)
        #expect(policy.update(for: GPSReport(kind: .sky, mode: 3, time: now), receivedAt: 1) == .ignore)
    }

    @Test func modeBelowMinimumLosesTheFix() {
        #expect(policy.update(for: tpv(mode: 1, lat: nil, lon: nil, time: now), receivedAt: 1) == .lost)
        #expect(policy.update(for: tpv(mode: 0, time: now), receivedAt: 1) == .ignore)  // "not seen" says nothing
        let strict = FixPolicy(maxFixAge: 10, minMode: 3)
        #expect(strict.update(for: tpv(mode: 2, time: now), receivedAt: 1) == .lost)
        if case .fix = strict.update(for: tpv(mode: 3, time: now), receivedAt: 1) {} else { Issue.record("3D") }
    }

    @Test func minModeIsClampedToTwoOrThree() {
        #expect(FixPolicy(maxFixAge: 1, minMode: 0).minMode == 2)
        #expect(FixPolicy(maxFixAge: 1, minMode: 9).minMode == 3)
    }

    @Test func freshWhileYoungerThanMaxFixAgeOnTheMonotonicClock() {
        let f = fix(gpsTime: now, receivedAt: 100)
        #expect(policy.isFresh(f, monotonicNow: 100))
        #expect(policy.isFresh(f, monotonicNow: 109.9))
        #expect(!policy.isFresh(f, monotonicNow: 110))
    }

    @Test func aReplayedFixIsNeverFresh() {
        // gpsd's POLL answer repeats the last fix for as long as the receiver is silent: just received, of any age.
        #expect(!policy.isFresh(fix(gpsTime: now - 17, receivedAt: 100, replayed: true), monotonicNow: 100))
        #expect(!policy.isFresh(fix(gpsTime: now, receivedAt: 100, replayed: true), monotonicNow: 100))
    }

    @Test func gpsTimeAgainstTheSystemClockDoesNotDecideFreshness() {
        // Receivers after a GPS week rollover report dates far from the system clock (the issue's replayed
        // regression logs: 1999, 2038...): a live fix that arrived 1 s ago is fresh whatever its date says, and
        // one that arrived 11 s ago is stale even when its date lies in the future.
        #expect(policy.isFresh(fix(gpsTime: now - 619_315_200, receivedAt: 100), monotonicNow: 101))
        #expect(!policy.isFresh(fix(gpsTime: now + 619_315_200, receivedAt: 100), monotonicNow: 111))
    }

    @Test func accuracyPrefersEphThenCombinesEpxEpy() {
        #expect(HorizontalAccuracy.from(eph: 8, epx: 11.195, epy: 10.988) == 8)
        #expect(HorizontalAccuracy.from(eph: nil, epx: 3, epy: 4) == 5)
        #expect(HorizontalAccuracy.from(eph: .nan, epx: 3, epy: 4) == 5)
        #expect(HorizontalAccuracy.from(eph: -1, epx: 6, epy: nil) == 6)
        #expect(HorizontalAccuracy.from(eph: nil, epx: nil, epy: 7) == 7)
        #expect(HorizontalAccuracy.from(eph: nil, epx: .infinity, epy: nil) == nil)
        #expect(HorizontalAccuracy.from(eph: nil, epx: nil, epy: nil) == nil)
    }

    @Test func gpsTimeIsExtrapolatedByMonotonicElapsedTime() {
        let f = fix(gpsTime: now, receivedAt: 100)
        #expect(f.gpsTime(atMonotonic: 102.5) == now + 2.5)
        #expect(f.gpsTime(atMonotonic: 99) == now)  // never backwards
    }
}

struct ClockCheckTests {
    let now = 1_790_000_000.0

    func live(gpsTime: Double, receivedAt: Double = 50, replayed: Bool = false) -> GPSFix {
        GPSFix(
            latitude: 0, longitude: 0, accuracy: nil, mode: 3, gpsTime: gpsTime, receivedAt: receivedAt,
            replayed: replayed)
    }

    @Test func aClockBefore2024IsUnsynchronised() {
        #expect(ClockCheck.isUnsynchronised(systemNow: 1_600_000_000, recentFix: nil, monotonicNow: 0))
        #expect(!ClockCheck.isUnsynchronised(systemNow: now, recentFix: nil, monotonicNow: 0))
        #expect(ClockCheck.isBeforeMinYear(systemNow: ClockCheck.minTime - 1))
        #expect(!ClockCheck.isBeforeMinYear(systemNow: ClockCheck.minTime))
    }

    @Test func moreThanFiveSecondsFromALiveFixIsUnsynchronised() {
        #expect(!ClockCheck.isUnsynchronised(systemNow: now, recentFix: live(gpsTime: now - 4.9), monotonicNow: 50))
        #expect(ClockCheck.isUnsynchronised(systemNow: now, recentFix: live(gpsTime: now - 5.1), monotonicNow: 50))
        #expect(ClockCheck.isUnsynchronised(systemNow: now, recentFix: live(gpsTime: now + 30), monotonicNow: 50))
        // Measured against the fix extrapolated to now: a 3 s old TPV is not skew.
        #expect(!ClockCheck.isUnsynchronised(systemNow: now, recentFix: live(gpsTime: now - 3), monotonicNow: 53))
        // gpsd's replayed cache says nothing about the clock.
        #expect(
            !ClockCheck.isUnsynchronised(
                systemNow: now, recentFix: live(gpsTime: now - 60, replayed: true), monotonicNow: 50))
    }

    @Test func offsetIsSystemMinusGPS() {
        #expect(ClockCheck.offset(systemNow: now, fix: live(gpsTime: now + 30), monotonicNow: 50) == -30)
        #expect(ClockCheck.offset(systemNow: now, fix: live(gpsTime: now - 10), monotonicNow: 52) == 8)
    }

    @Test func readTimeFollowsGPSOnlyWhenAskedAndUnsynchronised() {
        let skewed = live(gpsTime: now + 30, receivedAt: 50)
        #expect(
            ClockCheck.readTime(systemNow: now + 1, recentFix: skewed, monotonicNow: 51, timeFromGPS: true)
                == now + 31)
        #expect(
            ClockCheck.readTime(systemNow: now + 1, recentFix: skewed, monotonicNow: 51, timeFromGPS: false)
                == now + 1)
        let good = live(gpsTime: now + 1, receivedAt: 50)
        #expect(
            ClockCheck.readTime(systemNow: now + 1, recentFix: good, monotonicNow: 50, timeFromGPS: true) == now + 1)
        #expect(ClockCheck.readTime(systemNow: now, recentFix: nil, monotonicNow: 50, timeFromGPS: true) == now)
    }
}

struct GPSReportTests {
    typealias F = GPSReport.Flag
    let all = F.mode | F.latLon | F.time | F.eph | F.epx | F.epy | F.satellites

    func validate(
        kind: Int32 = GPSReport.RawKind.tpv, flags: UInt32? = nil, mode: Int32 = 3, lat: Double = 59,
        lon: Double = 18, eph: Double = 5, epx: Double = 11, epy: Double = 10,
        time: Double = 1_790_000_000, used: Int32 = 7, visible: Int32 = 8
    ) -> GPSReport {
        GPSReport.validate(
            kind: kind, flags: flags ?? all, mode: mode, latitude: lat, longitude: lon, eph: eph,
            epx: epx, epy: epy, time: time, satellitesUsed: used, satellitesVisible: visible)
    }

    @Test func goodValuesPassThrough() {
        let r = validate()
        #expect(
            r
                == GPSReport(
                    kind: .tpv, mode: 3, latitude: 59, longitude: 18, eph: 5, epx: 11, epy: 10,
                    time: 1_790_000_000, satellitesUsed: 7, satellitesVisible: 8))
        #expect(validate(flags: all | F.fromPoll).replayed)
    }

    @Test func fieldsWithoutTheirFlagAreAbsent() {
        let r = validate(flags: F.mode)
        #expect(r.mode == 3)
        #expect(r.latitude == nil && r.time == nil && r.eph == nil && r.satellitesUsed == nil)
    }

    @Test func garbageBecomesNil() {
        #expect(validate(lat: .nan).latitude == nil)
        #expect(validate(lat: 91).latitude == nil)
        #expect(validate(lon: -180.5).longitude == nil)
        #expect(validate(lat: .infinity).longitude == nil)  // a position is both or nothing
        #expect(validate(eph: -3).eph == nil)
        #expect(validate(eph: .nan).eph == nil)
        #expect(validate(epx: 1e9).epx == nil)
        #expect(validate(time: .nan).time == nil)
        #expect(validate(time: 0).time == nil)
        #expect(validate(time: 1e12).time == nil)
        #expect(validate(mode: 7).mode == nil)
        #expect(validate(mode: -1).mode == nil)
        #expect(validate(used: -1).satellitesUsed == nil)
        #expect(validate(kind: 99).kind == .other)
        #expect(validate(kind: GPSReport.RawKind.emptyPoll).kind == .emptyPoll)
    }

    @Test func validationNeverTrapsOnArbitraryBits() {
        // A small deterministic fuzz: whatever the bits, the result is either nil or sane.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            func anyDouble() -> Double { Double(bitPattern: generator.next()) }
            let r = GPSReport.validate(
                kind: Int32(truncatingIfNeeded: generator.next()), flags: UInt32(truncatingIfNeeded: generator.next()),
                mode: Int32(truncatingIfNeeded: generator.next()), latitude: anyDouble(), longitude: anyDouble(),
                eph: anyDouble(), epx: anyDouble(), epy: anyDouble(), time: anyDouble(),
                satellitesUsed: Int32(truncatingIfNeeded: generator.next()),
                satellitesVisible: Int32(truncatingIfNeeded: generator.next()))
            if let lat = r.latitude { #expect(lat.isFinite && abs(lat) <= 90) }
            if let eph = r.eph { #expect(eph.isFinite && eph >= 0) }
            if let time = r.time { #expect(GPSReport.timeRange.contains(time)) }
            if let mode = r.mode { #expect((0...3).contains(mode)) }
        }
    }
}

struct GPSDAddressTests {
    @Test func parsesTheUsualForms() {
        #expect(GPSDAddress.parse("127.0.0.1:2947") == GPSDAddress(host: "127.0.0.1", port: "2947"))
        #expect(GPSDAddress.parse("gps.local") == GPSDAddress(host: "gps.local", port: "2947"))
        #expect(GPSDAddress.parse("[::1]:3000") == GPSDAddress(host: "::1", port: "3000"))
        #expect(GPSDAddress.parse("[::1]") == GPSDAddress(host: "::1", port: "2947"))
        #expect(GPSDAddress.parse("::1") == GPSDAddress(host: "::1", port: "2947"))
    }

    @Test func rejectsNonsense() {
        #expect(GPSDAddress.parse("") == nil)
        #expect(GPSDAddress.parse(":2947") == nil)
        #expect(GPSDAddress.parse("host:0") == nil)
        #expect(GPSDAddress.parse("host:99999") == nil)
        #expect(GPSDAddress.parse("host:http") == nil)
        #expect(GPSDAddress.parse("[::1") == nil)
        #expect(GPSDAddress.parse("[::1]x") == nil)
    }
}
