import Bridge
import BridgeCore
import PlingsAPI
import Foundation

extension CLI {
    /// `plings-bridge doctor [--json]`: every check with its finding and fix (`Doctor`); exit 1 when one failed.
    func doctor(_ args: Arguments) throws -> Int32 {
        var settings: Settings?
        var configError: String?
        var token: String?
        var unreadableToken: String?
        do {
            settings = try self.settings(args)
            if let loaded = settings {
                // A member of group plings may not read the service's token (plings:plings 0600): a finding
                // for the api check, not a broken configuration.
                var lookupConfig = loaded.config
                lookupConfig.api.url = nil
                if loaded.config.api.url != nil,
                    case .unreadable(let path)? = try? TokenSource.resolve(
                        config: lookupConfig, environment: environment
                    )
                    .state
                {
                    unreadableToken = path
                } else {
                    token = try loadToken(loaded, logWarnings: false)
                }
            }
        } catch let CommandFailure.config(message) {
            configError = message
        }
        if let token { logger.addSecret(token) }
        let checks = Doctor.run(
            settings: settings, configError: configError, token: token, unreadableToken: unreadableToken,
            environment: environment, logger: quietLogger())
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
        let settings = try inspectionSettings(args)
        var path = settings.statusPath
        try requirePermission(path, what: "the service's status file", write: false)
        var live = LiveStatus.read(path)
        // Another configuration names another spool, but the installed service may still run: never call a
        // running service "not running".
        if live == nil, path != Settings.serviceStatusPath, let service = LiveStatus.read(Settings.serviceStatusPath) {
            logger.warn(
                "no service runs with this configuration's spool; showing the installed service",
                [("status", Settings.serviceStatusPath)])
            path = Settings.serviceStatusPath
            live = service
        }
        guard let live else {
            if args.json {
                print(#"{"running":false}"#)
            } else {
                show("plings-bridge is not running (no live status at \(path))")
            }
            return 1
        }
        let (pid, json) = (live.pid, live.json)
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
        if let config = json["config"], !config.isNull {
            var line = "config: \(config["path"]?.stringValue ?? "(built-in defaults)")"
            line +=
                " (generation \(config["generation"]?.intValue ?? 0), since \(config["appliedAt"]?.stringValue ?? "?"))"
            show(line)
            if let error = config["reloadError"]?.stringValue {
                show("  last reload refused, running on the previous configuration: \(error)")
            }
        }
        if let location = json["location"], !location.isNull {
            var line = "location: \(location["source"]?.stringValue ?? "?")"
            if let gpsd = location["gpsd"]?.stringValue {
                line +=
                    " (gpsd \(gpsd) \(location["gpsdConnected"]?.boolValue == true ? "connected" : "not connected"))"
            }
            let fix = location["fix"]
            if let fix, let lat = fix["latitude"]?.doubleValue, let lon = fix["longitude"]?.doubleValue {
                line += "; fix from \(fix["from"]?.stringValue ?? "?") \(lat),\(lon)"
                if let accuracy = fix["accuracy"]?.doubleValue { line += " ±\(accuracy) m" }
                if let age = fix["age"]?.doubleValue { line += ", \(age) s old" }
            } else {
                line += "; no fix (scans carry no position)"
            }
            show(line)
        }
        if let clock = json["clock"]?["state"]?.stringValue { show("clock: \(clock)") }
        // One line per registered sink ("api", "mqtt", ...): its state, where to, its backlog, the reason.
        var sinks = 0
        for key in SinkRegistry.modules.map(\.statusKey) {
            guard let sink = json[key], !sink.isNull else { continue }
            var line = "\(key): \(sink["state"]?.stringValue ?? "?")"
            if let broker = sink["broker"]?.stringValue { line += " to \(broker)" }
            if let pending = sink["pending"]?.intValue {
                sinks += 1  // a sink with a queue: scans go somewhere
                line += ", \(pending) pending"
            }
            if let reason = sink["reason"]?.stringValue { line += " (\(reason))" }
            show(line)
        }
        if sinks == 0 { show("no sink delivers scans: they are kept in the spool") }
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
