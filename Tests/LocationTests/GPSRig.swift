import BridgeTestSupport
import Foundation
import Logging

/// The gpsd rig (Tests/Rigs/gps_rig.py): a real gpsd fed by an NMEA writer on a pty, driven through stdin.
final class GPSRig: Sendable {
    let process: RunningProcess
    let port: Int

    enum RigError: Error, CustomStringConvertible {
        case start(String)
        case command(String, String?)
        var description: String {
            switch self {
            case .start(let why): return "rig did not start: \(why)"
            case .command(let command, let answer): return "rig command '\(command)' answered \(answer ?? "nothing")"
            }
        }
    }

    /// Starts the rig and waits (bounded) for `READY port=N`.
    init(_ options: [String] = []) throws {
        process = try RunningProcess("/usr/bin/python3", [Products.rig("gps_rig.py"), "--port", "0"] + options)
        guard let ready = process.waitForLine(timeout: 15, where: { $0.hasPrefix("READY") || $0.hasPrefix("ERR") }),
            ready.hasPrefix("READY"),
            let field = ready.split(separator: " ").first(where: { $0.hasPrefix("port=") }),
            let port = Int(field.dropFirst(5))
        else {
            let stderr = process.stderrText
            process.stop()
            throw RigError.start(stderr)
        }
        self.port = port
    }

    var address: String { "127.0.0.1:\(port)" }

    /// Sends a command and waits (bounded) for its `OK` line, written after the change took effect.
    func send(_ command: String, timeout: Double = 10) throws {
        let before = process.outputLines.count
        process.send(command)
        guard process.waitForLineCount(before + 1, timeout: timeout) else { throw RigError.command(command, nil) }
        let answer = process.outputLines[before]
        guard answer == "OK " + command.split(separator: " ").joined(separator: " ") else {
            throw RigError.command(command, answer)
        }
    }

    /// Ends the rig with `quit` (it kills gpsd and answers `OK quit`). Not SIGTERM: a child spawned from the test
    /// runner was seen ignoring SIGTERM for 5 s here (likely an inherited blocked signal mask), so
    /// `RunningProcess.stop()` fell back to SIGKILL after 3 s, leaving gpsd to the rig's guard.
    func stop() {
        guard process.process.isRunning else { return process.stop() }
        process.send("quit")
        if process.waitForExit(timeout: 3) == nil { process.stop() }
    }
}

/// A logger writing into a temporary file, so that tests can count the lines of each event.
final class CapturedLog: Sendable {
    let path: String
    let fd: Int32
    let logger: Logger

    init() {
        path = NSTemporaryDirectory() + "gps-log-\(UUID().uuidString.prefix(8)).txt"
        fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_APPEND, 0o600)
        logger = Logger(minimum: .info, fd: fd)
    }

    var lines: [String] {
        (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
    }

    func count(_ fragment: String) -> Int { lines.filter { $0.contains(fragment) }.count }

    deinit {
        close(fd)
        unlink(path)
    }
}
