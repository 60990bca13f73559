import Foundation
import Testing

@testable import BridgeCore

/// `GPSFixState` fed the example reports of gpsd_json(5) (gpsd 3.22, /usr/share/man/man5/gpsd_json.5.gz):
/// the TPV, SKY and POLL examples are copied from the man page, and every expected value is read off the example
/// text or its field table (mode 1 "no fix", 2 "2D", 3 "3D"; `eph` the horizontal error in metres; a POLL's
/// `tpv` is gpsd's cached last fix).
struct GPSFixStateTests {
    /// The man page's TPV example.
    static let tpv = """
        {"class":"TPV","device":"/dev/pts/1",
            "time":"2005-06-08T10:34:48.283Z","ept":0.005,
            "lat":46.498293369,"lon":7.567411672,"alt":1343.127,
            "eph":36.000,"epv":32.321,
            "track":10.3788,"speed":0.091,"climb":-0.085,"mode":3}
        """

    /// The man page's SKY example: eight satellites, five of them `"used":true`.
    static let sky = """
        {"class":"SKY","device":"/dev/pts/1",
            "time":"2005-07-08T11:28:07.114Z",
            "xdop":1.55,"hdop":1.24,"pdop":1.99,
            "satellites":[
                {"PRN":23,"el":6,"az":84,"ss":0,"used":false},
                {"PRN":28,"el":7,"az":160,"ss":0,"used":false},
                {"PRN":8,"el":66,"az":189,"ss":44,"used":true},
                {"PRN":29,"el":13,"az":273,"ss":0,"used":false},
                {"PRN":10,"el":51,"az":304,"ss":29,"used":true},
                {"PRN":4,"el":15,"az":199,"ss":36,"used":true},
                {"PRN":2,"el":34,"az":241,"ss":43,"used":true},
                {"PRN":27,"el":71,"az":76,"ss":43,"used":true}]}
        """

    /// The man page's POLL example (its SKY part shortened to the TPV this test is about).
    static let poll = """
        {"class":"POLL","time":"2010-06-04T10:31:00.289Z","active":1,
            "tpv":[{"class":"TPV","device":"/dev/ttyUSB0",
                    "time":"2010-09-08T13:33:06.095Z",
                    "ept":0.005,"lat":40.035093060,
                    "lon":-75.519748733,"track":99.4319,"speed":0.123,"mode":2}],
            "sky":[]}
        """

    /// The TPV example's time, seconds since 1970.
    static let tpvTime = epoch("2005-06-08T10:34:48.283Z")

    @Test func theManPagesTPVBecomesTheLiveFix() throws {
        var state = GPSFixState(policy: FixPolicy(maxFixAge: 10, minMode: 2))
        let change = state.apply(try report(Self.tpv), receivedAt: 100, systemNow: Self.tpvTime)
        #expect(change.counted)
        let fix = try #require(state.fix)
        #expect(fix.latitude == 46.498293369 && fix.longitude == 7.567411672)
        #expect(fix.accuracy == 36)  // eph
        #expect(fix.mode == 3)
        #expect(abs(fix.gpsTime - Self.tpvTime) < 0.0005)
        #expect(fix.receivedAt == 100 && !fix.replayed)
        #expect(state.liveFix == fix)
        #expect(state.lastMode == 3 && state.reports == 1)
    }

    @Test func theManPagesSKYGivesTheSatelliteCountsAndNoFix() throws {
        var state = GPSFixState(policy: FixPolicy())
        let change = state.apply(try report(Self.sky), receivedAt: 1, systemNow: Self.tpvTime)
        #expect(change == .init(counted: false, clockWarning: nil))
        #expect(state.satellitesVisible == 8 && state.satellitesUsed == 5)
        #expect(state.fix == nil && state.reports == 0 && state.lastMode == nil)
    }

    @Test func thePOLLAnswersTPVIsKeptButIsNotLive() throws {
        var state = GPSFixState(policy: FixPolicy(maxFixAge: 10, minMode: 2))
        let change = state.apply(
            try report(Self.poll), receivedAt: 5, systemNow: Self.epoch("2010-09-08T13:33:06.095Z"))
        #expect(change.counted)
        let fix = try #require(state.fix)
        #expect(fix.latitude == 40.035093060 && fix.longitude == -75.519748733 && fix.mode == 2)
        #expect(fix.accuracy == nil)  // the example has no eph, epx or epy
        #expect(fix.replayed)
        // gpsd's cache says nothing about now: neither a live fix nor a clock check.
        #expect(state.liveFix == nil && !state.clockUnsynchronised)
        #expect(state.reports == 1)
    }

    @Test func aPOLLWithoutTPVCountsAsAnAnswer() throws {
        var state = GPSFixState(policy: FixPolicy())
        let empty = #"{"class":"POLL","time":"2010-06-04T10:31:00.289Z","active":0,"tpv":[],"sky":[]}"#
        #expect(state.apply(try report(empty), receivedAt: 1, systemNow: Self.tpvTime).counted)
        #expect(state.reports == 1 && state.fix == nil)
    }

    /// Mode 1 is "no fix" (gpsd_json(5)): the fix held is dropped at once; mode 2 below a 3D minimum too.
    @Test func aNoFixTPVDropsTheFix() throws {
        var state = GPSFixState(policy: FixPolicy(maxFixAge: 10, minMode: 2))
        _ = state.apply(try report(Self.tpv), receivedAt: 1, systemNow: Self.tpvTime)
        let noFix = #"{"class":"TPV","device":"/dev/pts/1","time":"2005-06-08T10:34:49.283Z","mode":1}"#
        #expect(state.apply(try report(noFix), receivedAt: 2, systemNow: Self.tpvTime).counted)
        #expect(state.fix == nil && state.lastMode == 1)
        #expect(state.liveFix != nil)  // the last live fix stays for the clock check and its age

        var strict = GPSFixState(policy: FixPolicy(maxFixAge: 10, minMode: 3))
        _ = strict.apply(try report(Self.tpv), receivedAt: 1, systemNow: Self.tpvTime)
        _ = strict.apply(try report(Self.poll), receivedAt: 2, systemNow: Self.tpvTime)
        #expect(strict.fix == nil)
    }

    /// "time ... May be absent if mode is not 2 or 3" (gpsd_json(5)): a TPV without it teaches nothing.
    @Test func aTPVWithoutTimeIsCountedButChangesNoFix() throws {
        var state = GPSFixState(policy: FixPolicy())
        _ = state.apply(try report(Self.tpv), receivedAt: 1, systemNow: Self.tpvTime)
        let noTime = #"{"class":"TPV","device":"/dev/pts/1","lat":1.5,"lon":2.5,"mode":3}"#
        #expect(state.apply(try report(noTime), receivedAt: 2, systemNow: Self.tpvTime).counted)
        #expect(state.fix?.latitude == 46.498293369 && state.reports == 2)
    }

    /// The TPV example moved to 2026 (the example's 2005 is before any clock the bridge accepts as set).
    static let recentTPV = tpv.replacingOccurrences(of: "2005-06-08", with: "2026-06-08")
    static let recentTime = epoch("2026-06-08T10:34:48.283Z")

    /// A system clock a day behind a live fix's time is unsynchronised; the warning comes once. One a second
    /// off is within `ClockCheck.maxOffset` (5 s) and is not.
    @Test func aClockOffTheLiveFixWarnsOnce() throws {
        var state = GPSFixState(policy: FixPolicy())
        let behind = Self.recentTime - 86_400
        let first = state.apply(try report(Self.recentTPV), receivedAt: 10, systemNow: behind)
        let offset = try #require(first.clockWarning)
        #expect(abs(offset - -86_400) < 0.001)
        #expect(state.clockUnsynchronised)
        let second = state.apply(try report(Self.recentTPV), receivedAt: 11, systemNow: behind + 1)
        #expect(second.clockWarning == nil && state.clockUnsynchronised)

        var good = GPSFixState(policy: FixPolicy())
        let close = good.apply(try report(Self.recentTPV), receivedAt: 10, systemNow: Self.recentTime + 1)
        #expect(close.clockWarning == nil && !good.clockUnsynchronised)
    }

    @Test func aClockNotSetAtStartNeverWarnsAgain() throws {
        var state = GPSFixState(policy: FixPolicy())
        state.noteClockNotSet()
        #expect(state.clockUnsynchronised)
        let change = state.apply(try report(Self.recentTPV), receivedAt: 10, systemNow: Self.recentTime - 86_400)
        #expect(change.clockWarning == nil && state.clockUnsynchronised)
    }

    // MARK: gpsd JSON -> GPSReport, the way libgps and the C shim fill it

    /// Seconds since 1970 of an ISO 8601 UTC time with fractional seconds, as gpsd writes them.
    static func epoch(_ text: String) -> Double {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970 ?? .nan
    }

    struct NotAReport: Error {}

    /// The report libgps would hand over for one gpsd JSON object: a TPV's fields, a SKY's satellite counts, a
    /// POLL's first TPV as replayed (or `emptyPoll` without one).
    func report(_ json: String) throws -> GPSReport {
        let object = try JSONParser.parse(json)
        switch object["class"]?.stringValue {
        case "TPV":
            return tpv(object, replayed: false)
        case "SKY":
            guard case .array(let satellites)? = object["satellites"] else { throw NotAReport() }
            return GPSReport(
                kind: .sky, satellitesUsed: satellites.filter { $0["used"]?.boolValue == true }.count,
                satellitesVisible: satellites.count)
        case "POLL":
            guard case .array(let tpvs)? = object["tpv"] else { throw NotAReport() }
            return tpvs.first.map { tpv($0, replayed: true) } ?? GPSReport(kind: .emptyPoll)
        default:
            throw NotAReport()
        }
    }

    func tpv(_ object: JSONValue, replayed: Bool) -> GPSReport {
        GPSReport(
            kind: .tpv, mode: object["mode"]?.intValue, latitude: object["lat"]?.doubleValue,
            longitude: object["lon"]?.doubleValue, eph: object["eph"]?.doubleValue, epx: object["epx"]?.doubleValue,
            epy: object["epy"]?.doubleValue, time: object["time"]?.stringValue.map(Self.epoch), replayed: replayed)
    }
}
