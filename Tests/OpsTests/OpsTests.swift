import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import Platform
import Testing

/// The operational layer run for real: systemd notify protocol, status snapshot, metrics, doctor, packaging.
@Suite(.serialized)
struct OpsTests {
    let binary = Products.path("plings-bridge")

    func environment(_ dir: TemporaryDirectory, _ extra: [String: String] = [:]) -> [String: String] {
        Products.isolatedEnvironment(home: dir.path).merging(extra) { $1 }
    }

    @Test func notifiesReadyWatchdogAndStopping() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let notify = try NotifySocket(path: dir.file("notify"))
        let env = environment(dir, ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000000"])
        let bridge = try RunningProcess(
            binary, ["run", "--spool", dir.file("s.sqlite"), "--no-nfc", "--no-hid"], environment: env)
        defer { bridge.stop() }
        let ready = notify.receive(timeout: 20)
        #expect(ready?.hasPrefix("READY=1") == true)
        // WatchdogSec=2 s: a ping arrives within the period.
        #expect(notify.receive(timeout: 3) == "WATCHDOG=1")
        // ...and pings come at half the period (1 s), not in a loop: over 3.5 s at most 5 (a ping at each whole
        // second, one of them possibly queued from before), at least 2. A busy loop sent ~60,000 a second and
        // kept systemd itself too busy to answer systemctl.
        var pings = 0
        let until = MonotonicClock.deadline(after: 3.5)
        while MonotonicClock.now() < until, let message = notify.receive(timeout: until - MonotonicClock.now()) {
            if message == "WATCHDOG=1" { pings += 1 }
            if pings > 5 { break }
        }
        #expect((2...5).contains(pings), "\(pings) watchdog pings in 3.5 s with WATCHDOG_USEC=2000000")
        bridge.signal(SIGTERM)
        var stopping = false
        while let message = notify.receive(timeout: 5) {
            if message.contains("STOPPING=1") {
                stopping = true
                break
            }
        }
        #expect(stopping)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    @Test func statusAndMetricsWhileRunning() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let notify = try NotifySocket(path: dir.file("notify"))
        let config = dir.file("c.json")
        try #"{"metrics": {"textfile": "\#(dir.file("plings.prom"))", "interval": 1}}"#
            .write(toFile: config, atomically: true, encoding: .utf8)
        let spool = dir.file("s.sqlite")
        let env = environment(dir, ["NOTIFY_SOCKET": notify.path])
        let stopped = try ProcessRunner.run(binary, ["status", "--spool", spool], environment: env)
        #expect(stopped.status == 1 && stopped.stdout.contains("not running"))
        let bridge = try RunningProcess(
            binary, ["run", "--config", config, "--spool", spool, "--no-nfc", "--no-hid"], environment: env)
        defer { bridge.stop() }
        #expect(notify.receive(timeout: 20)?.hasPrefix("READY=1") == true)
        _ = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=A&p=1", "--spool", spool], environment: env)
        // The snapshot is written on the next refresh (5 s) once something changed; metrics every second.
        var status: JSONValue?
        for _ in 0..<40 {
            let result = try ProcessRunner.run(binary, ["status", "--json", "--spool", spool], environment: env)
            if result.status == 0, let json = try? JSONParser.parse(result.stdout.trimmingASCIIWhitespace()),
                json["spool"]?["counts"]?["kept"]?.intValue == 1
            {
                status = json
                break
            }
            _ = notify.receive(timeout: 0.25)  // a bounded pause that also drains notify messages
        }
        #expect(status?["pid"]?.intValue == Int(bridge.process.processIdentifier))
        // No API configured: its member is null, as every sink's is (issue 56).
        #expect(status?["api"] == .null)
        // The member's former name, beside it for a release (docs/contracts.md, "Aliases").
        #expect(status?["delivery"] == status?["api"])
        let metrics = (try? String(contentsOfFile: dir.file("plings.prom"), encoding: .utf8)) ?? ""
        #expect(metrics.contains("plings_bridge_up 1"))
        #expect(metrics.contains(#"plings_bridge_spool_scans{state="pending"}"#))
        // No sink: the scan is kept, the spool its destination (issue 56), and nothing is called pending.
        #expect(metrics.contains(#"plings_bridge_spool_scans{state="kept"} 1"#))
        #expect(metrics.contains(#"plings_bridge_spool_scans{state="pending"} 0"#))
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
        let after = try ProcessRunner.run(binary, ["status", "--spool", spool], environment: env)
        #expect(after.status == 1)
    }

    @Test func doctorPassesAgainstTheAPIAndNamesTheFixWhenTheTokenIsWrong() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let api = try APIStandIn()
        defer { api.stop() }
        let good = dir.file("good.json")
        try #"{"api": {"url": "\#(api.url)", "tokenFile": "\#(api.tokenFile)", "allowInsecureHTTP": true}}"#
            .write(toFile: good, atomically: true, encoding: .utf8)
        let ok = try ProcessRunner.run(
            binary, ["doctor", "--json", "--config", good, "--spool", dir.file("s.sqlite")],
            environment: environment(dir))
        let checks = try JSONParser.parse(ok.stdout.trimmingASCIIWhitespace())
        guard case .array(let items) = checks else {
            Issue.record("not an array: \(ok.stdout)")
            return
        }
        let byName = Dictionary(items.compactMap { item in item["name"]?.stringValue.map { ($0, item) } }) { a, _ in a }
        #expect(byName["api"]?["status"] == .string("ok"))
        #expect(byName["config"]?["status"] == .string("ok"))
        #expect(byName["spool"]?["status"] == .string("ok"))
        for item in items {
            for key in ["name", "status", "message", "fix"] { #expect(item[key] != nil) }
        }
        #expect(
            ok.status
                == DoctorCheck.exitCode(
                    items.map {
                        DoctorCheck(
                            $0["name"]?.stringValue ?? "",
                            DoctorCheck.Status(rawValue: $0["status"]?.stringValue ?? "") ?? .fail, "")
                    }))
        // Wrong token: the api check fails, says so, and doctor exits 1; the token is not printed.
        let badToken = dir.file("bad-token")
        try "wrong-token-value\n".write(toFile: badToken, atomically: true, encoding: .utf8)
        let bad = dir.file("bad.json")
        try #"{"api": {"url": "\#(api.url)", "tokenFile": "\#(badToken)", "allowInsecureHTTP": true}}"#
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try ProcessRunner.run(
            binary, ["doctor", "--config", bad, "--spool", dir.file("s.sqlite")], environment: environment(dir))
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("refused the token"))
        #expect(refused.stdout.contains("fix:"))
        #expect(!refused.stdout.contains("wrong-token-value") && !refused.stderr.contains("wrong-token-value"))
        // A bad config is reported as a failed check, not a crash.
        let broken = dir.file("broken.json")
        try #"{"api": {"timeout": "ten"}}"#.write(toFile: broken, atomically: true, encoding: .utf8)
        let configFail = try ProcessRunner.run(binary, ["doctor", "--config", broken], environment: environment(dir))
        #expect(configFail.status == 1 && configFail.stdout.contains("api.timeout"))
    }

    @Test func doctorNamesTheMissingPartAndItsFix() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        // No pcscd (its socket pointed elsewhere), no gpsd on the port, an unwritable spool location.
        let env = environment(dir, ["PCSCLITE_CSOCK_NAME": dir.file("no-pcscd.comm")])
        try "".write(toFile: dir.file("a-file"), atomically: true, encoding: .utf8)
        let result = try ProcessRunner.run(
            binary, ["doctor", "--json", "--gpsd", "127.0.0.1:9", "--spool", dir.file("a-file/spool.sqlite")],
            environment: env)
        #expect(result.status == 1)
        guard case .array(let items) = try JSONParser.parse(result.stdout.trimmingASCIIWhitespace()) else {
            Issue.record("not an array: \(result.stdout)")
            return
        }
        func check(_ name: String) -> JSONValue? { items.first { $0["name"]?.stringValue == name } }
        #expect(check("pcscd")?["status"] == .string("fail"))
        #expect(check("pcscd")?["fix"]?.stringValue?.contains("pcscd") == true)
        #expect(check("readers")?["status"] == .string("skip"))
        #expect(check("gpsd")?["status"] == .string("warn"))
        #expect(check("gpsd")?["fix"]?.stringValue?.contains("location.fixed") == true)
        #expect(check("spool")?["status"] == .string("fail"))
        #expect(check("spool")?["fix"]?.stringValue?.isEmpty == false)
        #expect(check("api")?["status"] == .string("skip"))
        // With the fixed position configured, a missing gpsd is fine.
        let fixed = try ProcessRunner.run(
            binary, ["doctor", "--json", "--gpsd", "127.0.0.1:9", "--fixed-location", "59.3,18.0,5"], environment: env)
        guard case .array(let again) = try JSONParser.parse(fixed.stdout.trimmingASCIIWhitespace()) else { return }
        #expect(again.first { $0["name"]?.stringValue == "gpsd" }?["status"] == .string("ok"))
    }

    @Test func unitFileExposureIsAtMostTwoPointFive() throws {
        let result = try ProcessRunner.run(
            "/usr/bin/systemd-analyze",
            [
                "security", "--offline=true", "--threshold=25",
                Products.packageRoot.appendingPathComponent("packaging/plings-bridge.service").path,
            ])
        #expect(result.status == 0, "\(result.stdout.suffix(600))")
        #expect(result.stdout.contains("Overall exposure level"))
    }
}
