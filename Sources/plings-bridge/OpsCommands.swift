import Bridge
import BridgeCore
import Foundation
import HID
import Location
import NFC

extension CLI {
    /// `plings-bridge doctor [--json]`: every check with its finding and fix; exit 1 when one failed.
    func doctor(_ rest: ArraySlice<String>) throws -> Int32 {
        let args = try Arguments(
            rest, valued: commonValued.union(sourceValued.keys), switches: Set(sourceSwitches.keys))
        if args.wantsHelp {
            print(Help.doctor)
            return 0
        }
        var settings: Settings?
        var configError: String?
        var token: String?
        do {
            settings = try self.settings(args, sources: true)
            if let loaded = settings { token = try loadToken(loaded, logWarnings: false) }
        } catch let CommandFailure.config(message) {
            configError = message
        }
        if let token { logger.addSecret(token) }
        let checks = Doctor.run(
            settings: settings, configError: configError, token: token,
            extraChecks: settings.map { tokenChecks($0) + hardwareChecks($0) } ?? [])
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

    /// The token file's warnings (one a group or other users can read), as findings.
    func tokenChecks(_ settings: Settings) -> [DoctorCheck] {
        let lookup = try? TokenSource.resolve(config: settings.config, environment: environment)
        return (lookup?.warnings ?? []).map { DoctorCheck("token", .warn, $0.message, fix: $0.fix) }
    }

    /// Checks contributed by the hardware modules (readers, scanners, gpsd).
    func hardwareChecks(_ settings: Settings) -> [DoctorCheck] {
        readerChecks(settings.config) + [scannersCheck(settings.config), gpsCheck(settings.config)]
    }

    /// pcscd reachable (and polkit letting us in), then the readers present.
    func readerChecks(_ config: BridgeConfig) -> [DoctorCheck] {
        guard config.nfc.enabled else { return [DoctorCheck("pcscd", .skip, "NFC readers disabled")] }
        let listing = NFCReaders.list()
        if let problem = listing.problem {
            let denied = problem.lowercased().contains("denied") || problem.lowercased().contains("security")
            return [
                DoctorCheck(
                    "pcscd", .fail, problem,
                    fix: denied
                        ? "install the polkit rule for group plings (udev/60-plings-bridge-pcsc.rules) and add the user to it"
                        : "install and start pcscd: apt-get install pcscd && systemctl enable --now pcscd.socket"),
                DoctorCheck("readers", .skip, "not checked: pcscd not reachable"),
            ]
        }
        let readers = listing.readers.filter { NFCSource.matches($0.name, patterns: config.nfc.readers) }
        let drivers = NFCDriverChecks.checks(readers: readers.map(\.name), config: config.nfc)
        let pcscd = DoctorCheck("pcscd", .ok, "pcscd reachable")
        if readers.isEmpty {
            return [
                pcscd,
                DoctorCheck(
                    "readers", .warn,
                    "no NFC reader attached" + (config.nfc.readers.isEmpty ? "" : " matching nfc.readers"),
                    fix:
                        "plug in a PC/SC reader (ACR122U: blacklist pn533/nfc, see docs/operations.md); `plings-bridge readers`"
                ),
            ] + drivers
        }
        return [
            pcscd,
            DoctorCheck("readers", .ok, "\(readers.count) reader(s): " + readers.map(\.name).joined(separator: ", ")),
        ] + drivers
    }

    func scannersCheck(_ config: BridgeConfig) -> DoctorCheck {
        guard config.hid.enabled else { return DoctorCheck("scanners", .skip, "HID scanners disabled") }
        let scanners = HIDSource.scan(config: config.hid).filter(\.matched)
        if scanners.isEmpty {
            return DoctorCheck(
                "scanners", .warn, "no barcode scanner found (none attached, or not recognised)",
                fix: "plug one in; `plings-bridge scanners` lists candidates and why they do not match (hid.match)")
        }
        let broken = scanners.filter { !$0.openable || !$0.grabbable }
        if let first = broken.first {
            return DoctorCheck(
                "scanners", .fail,
                "\(broken.count) of \(scanners.count) scanner(s) cannot be used: \(first.devnode): \(first.problem ?? "not openable or grabbable")",
                fix: "install the udev rule (group plings, mode 0660) and make sure no other program grabs the scanner")
        }
        return DoctorCheck(
            "scanners", .ok, "\(scanners.count) scanner(s): " + scanners.map(\.devnode).joined(separator: ", "))
    }

    func gpsCheck(_ config: BridgeConfig) -> DoctorCheck {
        let location = config.location
        guard location.enabled else { return DoctorCheck("gpsd", .skip, "location disabled: scans carry no position") }
        let client = GPSClient(config: location, logger: quietLogger())
        client.start()
        defer { client.stop() }
        _ = client.waitForFirstReport(timeout: 1.5)
        let status = client.status()
        let fallback = location.fixed.map { "the fixed position \($0.latitude),\($0.longitude) is used" }
        guard status.connected else {
            return DoctorCheck(
                "gpsd", fallback == nil ? .warn : .ok,
                "gpsd at \(location.gpsd) not reachable" + (fallback.map { "; \($0)" } ?? ": scans carry no position"),
                fix: fallback == nil
                    ? "start gpsd (systemctl start gpsd) or set location.fixed for a gate that does not move" : "")
        }
        if status.fresh, let lat = status.latitude, let lon = status.longitude {
            let accuracy = status.accuracy.map { String(format: " ±%.0f m", $0) } ?? ""
            return DoctorCheck("gpsd", .ok, "gpsd has a fix: \(lat),\(lon)\(accuracy), mode \(status.mode ?? 0)D")
        }
        return DoctorCheck(
            "gpsd", .warn,
            "gpsd reachable but no fresh fix (mode \(status.mode ?? 0))" + (fallback.map { "; \($0)" } ?? ""),
            fix: "give the receiver a view of the sky; check `plings-bridge gps`")
    }

    /// `plings-bridge status [--json]`: the running service's snapshot (sources, last reads, spool, delivery).
    func status(_ rest: ArraySlice<String>) throws -> Int32 {
        let args = try Arguments(rest, valued: commonValued, switches: [])
        if args.wantsHelp {
            print(Help.status)
            return 0
        }
        let settings = try self.settings(args, sources: false)
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
