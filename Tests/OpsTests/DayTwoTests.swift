import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import Platform
import Testing

/// What an administrator meets after the first day (issue 22), against the real executable: a config typo on
/// reload, inspection with a broken file, a moved gate, the metrics the docs promise.
@Suite(.serialized)
struct DayTwoTests {
    let binary = Products.path("plings-bridge")

    /// A clean environment, as `OpsTests` runs the binary.
    func environment(_ dir: TemporaryDirectory, _ extra: [String: String] = [:]) -> [String: String] {
        OpsTests().environment(dir, extra)
    }

    func write(_ text: String, _ path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    func statusJSON(_ config: String, _ env: [String: String]) throws -> JSONValue? {
        let result = try ProcessRunner.run(binary, ["status", "--json", "--config", config], environment: env)
        return try? JSONParser.parse(result.stdout.trimmingASCIIWhitespace())
    }

    /// The error line an administrator reads: the key, the value, the fix; no Swift type names, no escaping twice.
    func expectPlain(_ text: String, naming key: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(text.contains(key), "\(text)", sourceLocation: sourceLocation)
        #expect(
            !text.contains(#"\'"#) && !text.contains("config(") && !text.contains("CommandFailure"), "\(text)",
            sourceLocation: sourceLocation)
    }

    @Test func aRefusedReloadFailsLoudlyAndTheServiceKeepsItsConfiguration() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let notify = try NotifySocket(path: dir.file("notify"))
        let env = environment(dir, ["NOTIFY_SOCKET": notify.path])
        let config = dir.file("config.json")
        let gate = #""location": {"gpsd": "", "fixed": {"latitude": 59.3293, "longitude": 18.0686, "accuracy": 5}}"#
        try write("{\(gate)}", config)
        let bridge = try RunningProcess(binary, ["run", "--config", config, "--no-nfc", "--no-hid"], environment: env)
        defer { bridge.stop() }
        let ready = notify.receive(timeout: 20)
        #expect(ready?.hasPrefix("READY=1") == true && ready?.contains("STATUS=spooling locally") == true)
        let pid = Int(bridge.process.processIdentifier)

        // A typo: `reload` (the unit's ExecReload=) refuses it before signalling, exit 2, one plain line.
        try write(#"{"api": {"tiemout": 5}, \#(gate)}"#, config)
        let check = try ProcessRunner.run(binary, ["config", "check", "--config", config], environment: env)
        #expect(check.status == 2)
        expectPlain(check.stderr, naming: "'api.tiemout'")
        #expect(check.stderr.contains("did you mean 'api.timeout'?"), "\(check.stderr)")
        let refused = try ProcessRunner.run(binary, ["reload", "--config", config], environment: env)
        #expect(refused.status == 2, "\(refused.stdout) \(refused.stderr)")
        expectPlain(refused.stderr, naming: "'api.tiemout'")
        #expect(notify.receive(timeout: 0.5) == nil, "no signal was sent, so the service said nothing")
        #expect(try statusJSON(config, env)?["config"]?["generation"]?.intValue == 1)

        // A SIGHUP with a bad file (a bare `kill -HUP`): the service refuses it, says so to systemd and in its
        // status, and runs on. The latitude names its value and the range.
        try write(#"{"location": {"gpsd": "", "fixed": {"latitude": 95, "longitude": 18}}}"#, config)
        bridge.signal(SIGHUP)
        #expect(notify.receive(timeout: 10)?.hasPrefix("RELOADING=1") == true)
        let after = notify.receive(timeout: 10) ?? ""
        #expect(after.hasPrefix("READY=1"), "\(after)")
        #expect(after.contains("reload refused, running on the previous configuration"), "\(after)")
        #expect(after.contains("location.fixed.latitude is 95"), "\(after)")
        let status = try #require(try statusJSON(config, env))
        #expect(status["pid"]?.intValue == pid)
        #expect(status["config"]?["generation"]?.intValue == 2)
        #expect(status["config"]?["lastReload"] == .string("refused"))
        expectPlain(status["config"]?["reloadError"]?.stringValue ?? "", naming: "location.fixed.latitude is 95")
        // ...and still on the old position.
        #expect(status["location"]?["fix"]?["latitude"]?.doubleValue == 59.3293)
        let human = try ProcessRunner.run(binary, ["status", "--config", config], environment: env)
        #expect(human.stdout.contains("last reload refused, running on the previous configuration"), "\(human.stdout)")
        // The clock that stamps reads (issue 59): trusted or not, on what; the text shows the same words.
        let clock = try #require(status["clock"])
        let trusted = try #require(clock["trusted"]?.boolValue)
        #expect(clock["source"] == (trusted ? clock["source"] : .null))
        let words = try #require(clock["state"]?.stringValue)
        #expect(trusted != words.hasPrefix("not trusted: "), "\(words)")
        #expect(human.stdout.contains("clock: \(words)\n"), "\(human.stdout)")
        expectPlain(bridge.stderrText, naming: "reload refused")

        // The gate is moved: the new fixed position applies on reload, no restart, and `reload` says so.
        try write(#"{"location": {"gpsd": "", "fixed": {"latitude": 57.7089, "longitude": 11.9746}}}"#, config)
        let applied = try ProcessRunner.run(binary, ["reload", "--config", config], environment: env)
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(applied.stdout.contains("configuration reloaded"))
        let moved = try #require(try statusJSON(config, env))
        #expect(moved["pid"]?.intValue == pid)
        #expect(moved["config"]?["generation"]?.intValue == 3)
        #expect(moved["config"]?["lastReload"] == .string("applied"))
        #expect(moved["config"]?["reloadError"] == .null)
        #expect(moved["location"]?["source"] == .string("fixed"))
        #expect(moved["location"]?["fix"]?["from"] == .string("fixed"))
        #expect(moved["location"]?["fix"]?["latitude"]?.doubleValue == 57.7089)
        #expect(!bridge.stderrText.contains("take effect only after a restart"), "location is reloadable")
        _ = notify.receive(timeout: 1)  // RELOADING=1
        let readyAgain = notify.receive(timeout: 5) ?? ""
        #expect(readyAgain.hasPrefix("READY=1") && !readyAgain.contains("refused"), "\(readyAgain)")
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    @Test func aBadFileAtStartExitsTwoNamingTheKey() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let config = dir.file("config.json")
        try write(#"{"nfc": {"debouce": 2}}"#, config)
        let result = try ProcessRunner.run(
            binary, ["run", "--config", config, "--no-nfc", "--no-hid"], environment: environment(dir), timeout: 20)
        // 2 is the unit's RestartPreventExitStatus=: the unit ends failed instead of restarting in a loop.
        #expect(result.status == 2)
        expectPlain(result.stderr, naming: "'nfc.debouce'")
        #expect(result.stderr.contains("did you mean 'nfc.debounce'?"))
        #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
    }

    @Test func inspectionKeepsWorkingWhenTheConfigFileIsBroken() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let env = environment(dir)
        let config = dir.file("config.json")
        try write(#"{"location": {"enabled": false}}"#, config)
        let bridge = try RunningProcess(binary, ["run", "--config", config, "--no-nfc", "--no-hid"], environment: env)
        defer { bridge.stop() }
        #expect(bridge.waitForLog(timeout: 20) { $0.contains("msg=\"ready:") })
        let scan = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=Gate7&p=4.2", "--config", config], environment: env)
        #expect(scan.status == 0, "\(scan.stderr)")
        try write(#"{"location": {"enabled": fals}}"#, config)
        let status = try ProcessRunner.run(binary, ["status", "--config", config], environment: env)
        #expect(status.status == 0, "\(status.stdout) \(status.stderr)")
        #expect(status.stdout.contains("running, pid \(bridge.process.processIdentifier)"), "\(status.stdout)")
        #expect(status.stderr.split(separator: "\n").count == 1, "one warning line: \(status.stderr)")
        #expect(status.stderr.contains("level=warn") && status.stderr.contains("config check"), "\(status.stderr)")
        for sub in [["list"], ["stats"], ["export"]] {
            let result = try ProcessRunner.run(binary, ["spool"] + sub + ["--config", config], environment: env)
            #expect(result.status == 0, "\(sub): \(result.stderr)")
            if sub != ["stats"] { #expect(result.stdout.contains("Gate7"), "\(sub): \(result.stdout)") }
        }
        // Changing the spool is not inspection: a refused configuration stays an error there.
        let purge = try ProcessRunner.run(
            binary, ["spool", "purge", "--delivered", "--older-than", "7d", "--config", config], environment: env)
        #expect(purge.status == 2)
    }

    @Test func spoolListTakesTheNewestAndARecentWindowWithPositions() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let env = environment(dir)
        let spool = dir.file("s.sqlite")
        for n in 1...5 {
            let result = try ProcessRunner.run(
                binary,
                [
                    "scan", "https://s.plings.io/?t=q&i=Box\(n)&p=1", "--spool", spool, "--gpsd", "",
                    "--fixed-location", "59.3293,18.0686,5",
                ], environment: env)
            #expect(result.status == 0, "\(result.stderr)")
        }
        func identifiers(_ args: [String]) throws -> [String] {
            let result = try ProcessRunner.run(
                binary, ["spool", "list", "--json", "--spool", spool] + args, environment: env)
            #expect(result.status == 0, "\(args): \(result.stderr)")
            return result.stdoutLines.compactMap { try? JSONParser.parse($0)["input"]?["identifier"]?.stringValue }
        }
        #expect(try identifiers([]) == ["Box1", "Box2", "Box3", "Box4", "Box5"])
        #expect(try identifiers(["--last", "2"]) == ["Box4", "Box5"])
        #expect(try identifiers(["--limit", "2"]) == ["Box1", "Box2"])
        #expect(try identifiers(["--last", "2", "--newest-first"]) == ["Box5", "Box4"])
        #expect(try identifiers(["--since", "1h"]).count == 5)
        #expect(try identifiers(["--since", "0"]).isEmpty)
        let both = try ProcessRunner.run(
            binary, ["spool", "list", "--limit", "1", "--last", "1", "--spool", spool], environment: env)
        #expect(both.status == 2)
        let table = try ProcessRunner.run(binary, ["spool", "list", "--last", "1", "--spool", spool], environment: env)
        #expect(table.stdoutLines.count == 1 && table.stdout.contains("  59.3293,18.0686  "), "\(table.stdout)")
    }

    /// Every metric docs/operations.md lists is exported (the docs are the authority here), and nothing else.
    @Test func everyDocumentedMetricIsExported() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let docs = try String(
            contentsOf: Products.packageRoot.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let start = try #require(docs.range(of: "### Status and metrics"))
        let section = String(docs[start.upperBound...]).components(separatedBy: "\n### ").first ?? ""
        let pattern = try NSRegularExpression(pattern: "plings_bridge_[a-z_]+")
        let documented = Set(
            pattern.matches(in: section, range: NSRange(section.startIndex..., in: section)).map {
                String(section[Range($0.range, in: section)!])
            })
        #expect(documented.count >= 14, "\(documented.sorted())")

        let broker = try MosquittoRig()
        let api = try APIStandIn()
        defer { api.stop() }
        let metrics = dir.file("plings.prom")
        let config = dir.file("config.json")
        // gpsd on a port nobody listens on: the fix age is there, +Inf, before any fix. The local interface (its
        // families are documented too) on a port of this test's own.
        let http = #""http": {"listen": "127.0.0.1:\#(try ListeningSocket.freePort())"}"#
        // A webhook whose receiver is not there: its families are exported all the same.
        let webhook = #""webhook": {"url": "http://127.0.0.1:9/hook"}"#
        try write(
            """
            {"metrics": {"textfile": "\(metrics)", "interval": 1}, "location": {"gpsd": "127.0.0.1:9"}, \(http),
             "mqtt": {"url": "\(broker.url)", "allowInsecure": true, "deviceId": "gate7"}, \(webhook)}
            """, config)
        let env = Products.isolatedEnvironment(home: dir.path, listensHTTP: true)
        let bridge = try RunningProcess(binary, ["run", "--config", config, "--no-nfc", "--no-hid"], environment: env)
        defer { bridge.stop() }
        #expect(bridge.waitForLog(timeout: 20) { $0.contains("msg=\"ready:") })
        // `scan` delivers on its own (the service has no API): its attempt counts in the service's metrics.
        let scanConfig = dir.file("scan.json")
        let apiSection = #""api": {"url": "\#(api.url)", "tokenFile": "\#(api.tokenFile)", "allowInsecureHTTP": true}"#
        try write("{\(apiSection)}", scanConfig)
        let scan = try ProcessRunner.run(
            binary, ["scan", "https://s.plings.io/?t=q&i=Count&p=1", "--config", scanConfig], environment: env)
        #expect(scan.status == 0, "\(scan.stderr)")
        #expect(try api.requests(min: 1, wait: 10).count == 1)
        var text = ""
        let found = eventually(timeout: 15) {
            text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
            return text.contains("plings_bridge_delivery_attempts_total 1")
        }
        #expect(found, "\(text)")
        let exported = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
        // Without an API the service has no API sink to report; every other documented family is there.
        let apiFamilies = documented.filter {
            $0.hasPrefix("plings_bridge_api_") || $0 == "plings_bridge_delivery_healthy"
        }
        #expect(apiFamilies.count == 7, "\(apiFamilies.sorted())")
        #expect(
            exported == documented.subtracting(apiFamilies),
            "not documented: \(exported.subtracting(documented).sorted()); missing: \(documented.subtracting(exported).sorted())"
        )
        #expect(text.contains("plings_bridge_gps_fix_age_seconds +Inf"), "\(text)")
        #expect(text.contains(#"plings_bridge_reads_total{source="hid",outcome="pending"} 0"#), "\(text)")
        #expect(text.contains("plings_bridge_delivery_failures_total 0"), "\(text)")
        // With the API configured by a reload: the health appears, and with it every documented family.
        try write(
            """
            {"metrics": {"textfile": "\(metrics)", "interval": 1}, "location": {"gpsd": "127.0.0.1:9"}, \(http),
             "mqtt": {"url": "\(broker.url)", "allowInsecure": true, "deviceId": "gate7"}, \(webhook), \(apiSection)}
            """, config)
        bridge.signal(SIGHUP)
        #expect(
            eventually(timeout: 15) {
                text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
                // Under its name and, for a release, its former one (docs/operations.md).
                return text.contains("plings_bridge_api_healthy 1") && text.contains("plings_bridge_delivery_healthy 1")
            }, "\(text)")
        let all = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
        #expect(all == documented, "\(all.symmetricDifference(documented).sorted())")
    }

    /// doctor's broker probe connects as its own client: the service's session is never taken over (with one
    /// client id, Mosquitto closes the older connection and the service logs the loss and reconnects).
    @Test func doctorLeavesTheServiceBrokerSessionAlone() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let broker = try MosquittoRig()
        let metrics = dir.file("plings.prom")
        let config = dir.file("config.json")
        try write(
            """
            {"location": {"enabled": false}, "metrics": {"textfile": "\(metrics)", "interval": 1},
             "mqtt": {"url": "\(broker.url)", "allowInsecure": true, "deviceId": "gate7"}}
            """, config)
        let env = environment(dir)
        let bridge = try RunningProcess(binary, ["run", "--config", config, "--no-nfc", "--no-hid"], environment: env)
        defer { bridge.stop() }
        #expect(bridge.waitForLog(timeout: 20) { $0.contains("mqtt: connected; publishing") })
        for _ in 0..<2 {
            let doctor = try ProcessRunner.run(
                binary, ["doctor", "--json", "--config", config, "--no-nfc", "--no-hid"], environment: env)
            let checks = try JSONParser.parse(doctor.stdout.trimmingASCIIWhitespace())
            guard case .array(let items) = checks else {
                Issue.record("not an array: \(doctor.stdout)")
                return
            }
            #expect(items.first { $0["name"] == .string("mqtt") }?["status"] == .string("ok"), "\(doctor.stdout)")
        }
        // A takeover shows at once as a lost connection in the service's log; none may come.
        #expect(!eventually(timeout: 3) { bridge.stderrText.contains("mqtt: cannot publish") }, "\(bridge.stderrText)")
        var text = ""
        #expect(
            eventually(timeout: 5) {
                text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
                return text.contains("plings_bridge_mqtt_connects_total 1")
            }, "\(text)")
    }
}
