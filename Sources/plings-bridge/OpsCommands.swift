import Bridge
import BridgeCore
import Foundation

extension CLI {
    /// `plings-bridge doctor [--json]`: every check with its finding and fix (`Doctor`); exit 1 when one failed.
    func doctor(_ args: Arguments) throws -> Int32 {
        var settings: Settings?
        var configError: String?
        var token: String?
        do {
            settings = try self.settings(args)
            if let loaded = settings { token = try loadToken(loaded, logWarnings: false) }
        } catch let CommandFailure.config(message) {
            configError = message
        }
        if let token { logger.addSecret(token) }
        let checks = Doctor.run(
            settings: settings, configError: configError, token: token, environment: environment,
            logger: quietLogger())
        if args.json {
            print(JSONValue.array(checks.map { $0.json() }).encoded())
        } else {
            for check in checks {
                show("[\(check.status.rawValue.padding(4))] \(check.name): \(check.message)")
                if !check.fix.isEmpty, check.status != .ok { show("       fix: \(check.fix)") }
            }
            let failed = checks.filter { $0.status == .fail }.count
            print(failed == 0 ? "all checks passed" : "\(failed) check(s) failed")
        }
        return DoctorCheck.exitCode(checks)
    }

    /// `plings-bridge status [--json]`: the running service's snapshot (sources, last reads, spool, delivery).
    func status(_ args: Arguments) throws -> Int32 {
        let settings = try self.settings(args)
        let path = settings.statusPath
        try requirePermission(path, what: "the service's status file", write: false)
        // A pid outside 1...Int32.max is a broken file, not a process: kill(0) and kill(-1) would "find" our own
        // process group or every process.
        guard let data = FileManager.default.contents(atPath: path), let json = try? JSONParser.parse([UInt8](data)),
            let pid = json["pid"]?.intValue.flatMap({ Int32(exactly: $0) }), pid > 0,
            kill(pid, 0) == 0 || errno == EPERM
        else {
            if args.json {
                print(#"{"running":false}"#)
            } else {
                show("plings-bridge is not running (no live status at \(path))")
            }
            return 1
        }
        if args.json {
            print(json.encoded())
            return 0
        }
        show(
            "plings-bridge \(json["version"]?.stringValue ?? "?") running, pid \(pid), since \(json["startedAt"]?.stringValue ?? "?")"
        )
        if let counts = json["spool"]?["counts"] {
            show(
                "spool: "
                    + ScanState.allCases.map { "\($0.rawValue) \(counts[$0.rawValue]?.intValue ?? 0)" }.joined(
                        separator: ", "))
        }
        if let delivery = json["delivery"] {
            var line = "delivery: \(delivery["state"]?.stringValue ?? "?")"
            if let reason = delivery["reason"]?.stringValue { line += " (\(reason))" }
            show(line)
        }
        if let mqtt = json["mqtt"], !mqtt.isNull {
            var line = "mqtt: \(mqtt["state"]?.stringValue ?? "?") to \(mqtt["broker"]?.stringValue ?? "?")"
            line += ", \(mqtt["pending"]?.intValue ?? 0) pending"
            if let reason = mqtt["reason"]?.stringValue { line += " (\(reason))" }
            print(line)
        }
        if case .array(let sources)? = json["sources"] {
            for source in sources {
                show("source \(source["kind"]?.stringValue ?? "?"): \(source["state"]?.stringValue ?? "?")")
                if let feedback = source["feedback"] {
                    var line = "  reader feedback: \(feedback["sent"]?.intValue ?? 0) sent, "
                    line += "\(feedback["tagGone"]?.intValue ?? 0) after the tag left, "
                    line += "\(feedback["refused"]?.intValue ?? 0) refused"
                    if let problem = feedback["lastProblem"]?.stringValue { line += " (last: \(problem))" }
                    show(line)
                }
            }
        }
        if case .object(let reads)? = json["lastReads"] {
            for (device, read) in reads {
                let outcome = read["outcome"]?.stringValue ?? "?"
                show("last read \(device): \(read["time"]?.stringValue ?? "?") (at read time: \(outcome))")
            }
        }
        if let error = json["lastError"]?.stringValue { show("last error: \(error)") }
        return 0
    }
}
