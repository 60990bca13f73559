import BridgeCore
import CSysShim
import PlingsAPI
import Foundation
import Glibc
import HID
import Location
import Logging
import NFC
import SinkKit
import SourceKit
import ReadPipeline
import Spool

/// `plings-bridge doctor`: checks what a gate box needs, each with a one-line finding and the fix.
///
/// Hardware checks are contributed by the source modules (`NFCDoctor`, `HIDDoctor`, `LocationDoctor`) and the sinks'
/// by the sink modules (the API's request, the broker's login), so this file knows no PC/SC, udev, libgps, HTTP or
/// MQTT. Nothing here changes the system; the CLI only prints the result.
public enum Doctor {
    /// Every check in `doctor`'s order. `settings` is nil when the configuration did not load (`configError`
    /// says why): then only that finding is reported. `logger` gets the gpsd connection's own lines.
    ///   - unreadableToken: the token file this user may not read (a member of group plings on an installed box):
    ///     the API check then says what it could not check instead of claiming there is no API.
    public static func run(
        settings: Settings?, configError: String?, token: String?, unreadableToken: String? = nil,
        environment: [String: String], logger: Logger
    ) -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        if let configError {
            checks.append(
                DoctorCheck("config", .fail, configError, fix: "correct the named key (docs/configuration.md)"))
        } else {
            checks.append(
                DoctorCheck("config", .ok, "configuration valid (\(settings?.configPath ?? "built-in defaults"))"))
        }
        guard let settings else { return checks }
        checks.append(spoolCheck(settings))
        checks.append(diskCheck(settings))
        let sinkDoctor = SinkDoctorContext(
            configuration: SinkConfiguration(config: settings.config, apiToken: token),
            unreadableToken: unreadableToken, logger: logger)
        for sink in SinkRegistry.modules { checks.append(contentsOf: sink.doctor(sinkDoctor)) }
        checks.append(contentsOf: tokenChecks(settings, environment: environment))
        let config = settings.config
        for source in SourceRegistry.modules { checks.append(contentsOf: source.doctor(config, logger)) }
        checks.append(LocationDoctor.check(config: config.location, logger: logger))
        checks.append(udevRulesCheck())
        checks.append(polkitCheck())
        checks.append(clockCheck())
        if let metrics = metricsCheck(settings) { checks.append(metrics) }
        return checks
    }

    /// The token file's warnings (one a group or other users can read), as findings.
    static func tokenChecks(_ settings: Settings, environment: [String: String]) -> [DoctorCheck] {
        let lookup = try? TokenSource.resolve(config: settings.config, environment: environment)
        return (lookup?.warnings ?? []).map { DoctorCheck("token", .warn, $0.message, fix: $0.fix) }
    }

    /// With `metrics.textfile` set: the file exists, is fresh, readable by other users (node_exporter), and the
    /// running service reports no write error (from its status snapshot).
    static func metricsCheck(_ settings: Settings) -> DoctorCheck? {
        guard let path = settings.config.metrics.textfile else { return nil }
        if let data = FileManager.default.contents(atPath: settings.statusPath),
            let json = try? JSONParser.parse([UInt8](data)), let error = json["metrics"]?["lastError"]?.stringValue
        {
            return DoctorCheck(
                "metrics", .fail, "the service cannot write \(path): \(error)",
                fix: "make the directory writable by the service (ReadWritePaths= in a drop-in) or change "
                    + "metrics.textfile")
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            return DoctorCheck(
                "metrics", .warn, "no metrics file at \(path) yet (is the service running?)",
                fix: "systemctl status plings-bridge")
        }
        if info.st_mode & 0o004 == 0 {
            return DoctorCheck(
                "metrics", .warn, "\(path) is not readable by other users: node_exporter cannot read it",
                fix: "restart the service (it writes the file 0644)")
        }
        let age = Date().timeIntervalSince1970 - Double(info.st_mtim.tv_sec)
        if age > 3 * settings.config.metrics.interval + 10 {
            return DoctorCheck(
                "metrics", .warn,
                String(
                    format: "\(path) is %.0f s old (the service writes it every %.0f s)", age,
                    settings.config.metrics.interval),
                fix: "systemctl status plings-bridge")
        }
        return DoctorCheck("metrics", .ok, "\(path) written by the service, readable by node_exporter")
    }

    static func spoolCheck(_ settings: Settings) -> DoctorCheck {
        if !FileManager.default.fileExists(atPath: settings.spoolPath) {
            // Do not create it: find the nearest existing directory and check we could.
            var directory = (settings.spoolPath as NSString).deletingLastPathComponent
            while !FileManager.default.fileExists(atPath: directory), directory != "/" {
                directory = (directory as NSString).deletingLastPathComponent
            }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), !isDirectory.boolValue {
                return DoctorCheck(
                    "spool", .fail, "cannot create \(settings.spoolPath): \(directory) is a file, not a directory",
                    fix: "set spool.path (or --spool) to a path in a writable directory")
            }
            if access(directory, W_OK) == 0 {
                return DoctorCheck("spool", .ok, "no spool yet; it will be created at \(settings.spoolPath)")
            }
            return DoctorCheck(
                "spool", .fail, "cannot create \(settings.spoolPath): \(directory) is not writable",
                fix: "create the directory for the service user, or set spool.path (systemd: StateDirectory)")
        }
        // Read-only first: doctor says what is wrong and leaves the moving aside to the service (issue 43).
        if let problem = Spool.integrityProblem(path: settings.spoolPath) {
            return DoctorCheck(
                "spool", .fail, "spool \(settings.spoolPath) is damaged: \(problem)",
                fix:
                    "restart the service: it moves the damaged file aside, takes new reads in a fresh spool and copies "
                    + "every readable scan over (docs/operations.md, \"A damaged spool\"); then replace the storage card"
            )
        }
        let damaged = SpoolDamageWatch.damagedFiles(of: settings.spoolPath)
        do {
            let spool = try Spool(path: settings.spoolPath, synchronous: settings.config.spool.synchronous)
            let stats = try spool.stats()
            let pending = stats.counts[.pending] ?? 0
            let dead = stats.counts[.dead] ?? 0
            var message = "spool \(settings.spoolPath) writable, schema v\(stats.schemaVersion), \(pending) pending"
            if dead > 0 { message += ", \(dead) dead" }
            if let newest = damaged.last {
                let salvage = SpoolDamageWatch.salvaged(newest)
                message +=
                    "; \(damaged.count) damaged file(s) moved aside beside it (newest \(newest): "
                    + (salvage.map { "\($0["recovered"]?.encoded() ?? "?") scans copied back" } ?? "not salvaged yet")
                    + ")"
                return DoctorCheck(
                    "spool", .warn, message,
                    fix: "the storage wears: replace the card soon; once the salvage is done, remove the damaged files "
                        + "(docs/operations.md, \"A damaged spool\")")
            }
            return DoctorCheck(
                "spool", dead > 0 ? .warn : .ok, message,
                fix: dead > 0
                    ? "inspect with `plings-bridge spool list --state dead`; revive with `spool retry --dead`" : "")
        } catch {
            return DoctorCheck(
                "spool", .fail, "\(error)", fix: "make the spool directory writable by the service user (plings)")
        }
    }

    static func diskCheck(_ settings: Settings) -> DoctorCheck {
        var info = statvfs()
        let directory = (settings.spoolPath as NSString).deletingLastPathComponent
        guard statvfs(directory, &info) == 0 else {
            return DoctorCheck("disk", .warn, "cannot read free space of \(directory): errno \(errno)")
        }
        let free = Double(info.f_bavail) * Double(info.f_frsize) / 1_048_576
        let text = String(format: "%.0f MiB free for the spool", free)
        if free < 10 {
            return DoctorCheck("disk", .fail, text, fix: "free disk space: new reads are refused when full")
        }
        if free < 200 { return DoctorCheck("disk", .warn, text, fix: "free disk space or purge delivered scans") }
        return DoctorCheck("disk", .ok, text)
    }

    static let udevRulePaths = [
        "/etc/udev/rules.d/70-plings-bridge.rules", "/lib/udev/rules.d/70-plings-bridge.rules",
        "/usr/lib/udev/rules.d/70-plings-bridge.rules",
    ]
    /// Where the package installs the rule, and where docs/operations.md says to copy it by hand (one name).
    static let polkitPaths = [
        "/usr/share/polkit-1/rules.d/60-plings-bridge-pcsc.rules",
        "/etc/polkit-1/rules.d/60-plings-bridge-pcsc.rules",
    ]

    static func udevRulesCheck() -> DoctorCheck {
        if let path = udevRulePaths.first(where: FileManager.default.fileExists) {
            return DoctorCheck("udev rules", .ok, "installed: \(path)")
        }
        return DoctorCheck(
            "udev rules", .warn,
            "70-plings-bridge.rules not installed: scanners are not tagged or given to group plings",
            fix: "scripts/install (or copy udev/70-plings-bridge.rules to /etc/udev/rules.d and run udevadm trigger)")
    }

    static func polkitCheck() -> DoctorCheck {
        if let path = polkitPaths.first(where: FileManager.default.fileExists) {
            return DoctorCheck("polkit rule", .ok, "installed: \(path)")
        }
        return DoctorCheck(
            "polkit rule", .warn, "no polkit rule for group plings: pcscd refuses a service user without a session",
            fix:
                "scripts/install (or copy udev/60-plings-bridge-pcsc.rules to /etc/polkit-1/rules.d/)"
        )
    }

    /// Whether the wall clock can be trusted (`ClockTrust`: the kernel's verdict, an RTC that set it at boot, the
    /// year): reads are stamped with it.
    static func clockCheck() -> DoctorCheck {
        switch ClockTrust.ofSystem() {
        case .synchronized:
            return DoctorCheck("clock", .ok, "system clock synchronised by NTP")
        case .realTimeClock(let rtc):
            return DoctorCheck(
                "clock", .ok, "system clock set from the hardware clock \(rtc) at boot (not synchronised by NTP)")
        case .untrusted(let reason):
            let year = Calendar(identifier: .gregorian).component(.year, from: Date())
            if year < ClockTrust.earliestYear {
                return DoctorCheck(
                    "clock", .fail, "system clock says \(year): scan times would be wrong",
                    fix: "enable NTP (systemd-timesyncd) or set location.timeFromGPS with a GPS receiver")
            }
            return DoctorCheck(
                "clock", .warn,
                "system clock \(ClockTrust.untrusted(reason).description); scan times rest on it as it is",
                fix: "enable NTP (timedatectl set-ntp true), or set location.timeFromGPS with a GPS receiver")
        }
    }
}
