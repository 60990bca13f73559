import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// End to end: the real `plings-bridge gps --json` binary against the real rig.
@Suite(.serialized)
struct GPSCommandTests {
    func runGPS(_ arguments: [String]) throws -> ProcessResult {
        let dir = TemporaryDirectory("gps-cli")
        defer { dir.remove() }
        // An empty config file keeps /etc/plings-bridge/config.json out of the test.
        let config = dir.file("config.json")
        try "{}".write(toFile: config, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = dir.path
        return try ProcessRunner.run(
            Products.path("plings-bridge"), ["gps", "--config", config] + arguments, environment: environment,
            timeout: 20)
    }

    @Test func jsonWithAFix() throws {
        let rig = try GPSRig(["--lat", "59.3293", "--lon", "18.0686", "--error", "8"])
        defer { rig.stop() }
        let result = try runGPS(["--json", "--gpsd", rig.address])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONParser.parse(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(json["connected"]?.boolValue == true)
        #expect(json["mode"]?.intValue == 3)
        #expect(abs((json["latitude"]?.doubleValue ?? 0) - 59.3293) < 1e-6)
        #expect(abs((json["longitude"]?.doubleValue ?? 0) - 18.0686) < 1e-6)
        #expect(json["accuracy"]?.doubleValue == 8.0)
        #expect((json["fixAge"]?.doubleValue ?? 99) < 3)
        #expect(json["satellitesUsed"]?.intValue == 7)
        #expect(json["satellitesVisible"]?.intValue == 8)
        // A live TPV follows gpsd's cached one within a 1 Hz cycle: the offset is known and small here.
        #expect(abs(json["clockOffset"]?.doubleValue ?? 99) < 1)
    }

    @Test func gpsdAbsentIsReportedNotAFailure() throws {
        let rig = try GPSRig(["--no-gpsd"])
        defer { rig.stop() }
        let started = Date()
        let json = try runGPS(["--json", "--gpsd", rig.address])
        #expect(json.status == 0)
        #expect(Date().timeIntervalSince(started) < 5)
        let value = try JSONParser.parse(json.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(value["connected"]?.boolValue == false)
        for key in [
            "mode", "latitude", "longitude", "accuracy", "fixAge", "satellitesUsed", "satellitesVisible",
            "clockOffset",
        ] {
            #expect(value[key]?.isNull == true, "\(key) is null")
        }
        let human = try runGPS(["--gpsd", rig.address])
        #expect(human.status == 0)
        #expect(human.stdout.contains("not reachable"))
    }

    @Test func badAddressIsAUsageError() throws {
        let result = try runGPS(["--gpsd", "127.0.0.1:99999"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--gpsd"))
    }
}
