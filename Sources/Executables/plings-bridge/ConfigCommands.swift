import Bridge
import BridgeCore
import Foundation
import Platform

/// The running service as its status file shows it: `status`, `reload`.
struct LiveStatus {
    let pid: Int32
    let json: JSONValue
    /// The configuration generation the service runs (1 at start, +1 per reload).
    var generation: Int { json["config"]?["generation"]?.intValue ?? 0 }

    /// The snapshot at `path` when a live process wrote it; nil when there is none, it is unreadable, or its
    /// process is gone. A pid outside 1...Int32.max is a broken file, not a process: kill(0) and kill(-1) would
    /// "find" our own process group or every process.
    static func read(_ path: String) -> LiveStatus? {
        guard let data = FileManager.default.contents(atPath: path), let json = try? JSONParser.parse([UInt8](data)),
            let pid = json["pid"]?.intValue.flatMap({ Int32(exactly: $0) }), pid > 0,
            kill(pid, 0) == 0 || errno == EPERM
        else { return nil }
        return LiveStatus(pid: pid, json: json)
    }
}

extension CLI {
    /// `plings-bridge config check`: loads the configuration exactly as `run` would (file, environment, flags,
    /// the token file) and says whether the service would accept it. The step before every reload.
    func config(_ args: Arguments) throws -> Int32 {
        guard args.positional == ["check"] else {
            throw CommandFailure.usage("config takes one subcommand: check")
        }
        let settings = try self.settings(args)
        _ = try loadToken(settings)
        let path = settings.configPath ?? "(no file: built-in defaults)"
        if args.json {
            print(JSONValue.object([("ok", .bool(true)), ("config", .string(path))]).encoded())
        } else {
            show("configuration OK: \(path)")
        }
        return 0
    }

    /// `plings-bridge reload`: the unit's `ExecReload=`. Checks the configuration first: a bad one is refused
    /// here (exit 2, the reason on the terminal and in `systemctl status`) and the service is not disturbed.
    /// Then SIGHUP, and a wait for the service to say, through its status file, that it applied the new
    /// generation (exit 0) or refused it (exit 1, with its reason).
    func reload(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("reload takes no arguments") }
        let settings = try self.settings(args)
        _ = try loadToken(settings)
        let timeout = try args.value("--timeout").map { try DurationText.wait($0, flag: "--timeout") } ?? 10
        let before = LiveStatus.read(settings.statusPath)
        let pid: Int32
        if let text = args.value("--pid") {
            guard let given = Int32(text), given > 0 else {
                throw CommandFailure.usage("--pid must be a process id, not '\(text)'")
            }
            pid = given
        } else if let before {
            pid = before.pid
        } else {
            throw CommandFailure.runtime(
                "no running plings-bridge (no live status at \(settings.statusPath)); start it instead")
        }
        let generation = before?.pid == pid ? before?.generation ?? 0 : 0
        guard kill(pid, SIGHUP) == 0 else {
            throw CommandFailure.runtime("cannot signal process \(pid): \(String(cString: strerror(errno)))")
        }
        // The service writes its status file (a rename into its directory) before it tells systemd READY=1: look
        // at it each time its directory changes, for at most `timeout` (every 50 ms where inotify is not to be had).
        let deadline = MonotonicClock.deadline(after: timeout)
        let watch = DirectoryWatch((settings.statusPath as NSString).deletingLastPathComponent)
        while MonotonicClock.now() < deadline {
            if let after = LiveStatus.read(settings.statusPath), after.pid == pid, after.generation > generation {
                let config = after.json["config"]
                if config?["lastReload"]?.stringValue == "refused" {
                    let reason = config?["reloadError"]?.stringValue ?? "unknown reason"
                    throw CommandFailure.runtime(
                        "the service refused the new configuration and keeps running on the previous one: \(reason)")
                }
                show("configuration reloaded: \(config?["path"]?.stringValue ?? "(built-in defaults)")")
                return 0
            }
            if let watch {
                _ = watch.wait(until: deadline)
            } else {
                MonotonicClock.sleep(seconds: 0.05)
            }
        }
        throw CommandFailure.runtime(
            "process \(pid) did not confirm the reload within \(Int(timeout)) s (is it plings-bridge run?)")
    }
}
