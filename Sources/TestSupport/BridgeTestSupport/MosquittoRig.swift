import Foundation
import Platform

/// A real Mosquitto broker (Debian `mosquitto`) for one test: its own config file, a free loopback port kept
/// across restarts, logging to stdout. Never the system service.
public final class MosquittoRig: Sendable {
    public let port: Int
    public let directory: TemporaryDirectory
    private let configPath: String
    /// The running broker, nil while it is stopped or killed.
    private let process = Mutex<RunningProcess?>(nil)

    /// - Parameter listenerOptions: lines for the listener (e.g. `allow_anonymous true`, TLS files).
    /// - Parameter persistence: keep sessions on disk (SIGUSR1 writes them at once: `saveSessions`).
    public init(listenerOptions: [String] = ["allow_anonymous true"], persistence: Bool = false) throws {
        directory = TemporaryDirectory("mosquitto")
        port = try MosquittoRig.freePort()
        configPath = directory.file("mosquitto.conf")
        var lines = [
            // As root, mosquitto would switch to user `mosquitto`, who cannot read the test's files.
            getuid() == 0 ? "user root" : "", "per_listener_settings false", "log_dest stdout", "log_type error",
            "log_type warning", "log_type notice", "log_type information", "connection_messages true",
        ]
        if persistence {
            lines += ["persistence true", "persistence_location \(directory.path)/", "autosave_interval 3600"]
        } else {
            lines.append("persistence false")
        }
        // An offline persistent subscriber may be owed more than mosquitto's default of 1000 messages.
        lines.append("max_queued_messages 1000000")
        lines.append("listener \(port) 127.0.0.1")
        lines += listenerOptions
        try (lines.joined(separator: "\n") + "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
        try start()
    }

    deinit {
        kill()
        directory.remove()
    }

    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts the broker (again, on the same port) and waits until it listens.
    public func start() throws {
        // Through the launcher that clears the signal mask the test runner's thread would hand down: with SIGUSR1
        // blocked, mosquitto never saved its sessions (`saveSessions`), and a restarted broker had none.
        let broker = try RunningProcess(
            "/usr/bin/python3",
            ["-c", NFCRig.launcher(takeLock: false), "/usr/sbin/mosquitto", "-c", configPath])
        // mosquitto's log on a pipe is block-buffered: readiness is the port accepting a connection.
        guard eventually(timeout: 10, { !broker.process.isRunning || MosquittoRig.accepts(port) }),
            broker.process.isRunning
        else {
            broker.stop()
            throw RigError(
                "mosquitto did not start: \(broker.outputLines.joined(separator: "\n")) \(broker.stderrText)")
        }
        process.withLock { $0 = broker }
    }

    /// SIGKILL: the broker dies without a word (no session saved, no clean goodbye to clients).
    public func kill() {
        guard let broker = process.withLock({ $0 }) else { return }
        broker.signal(SIGKILL)
        _ = broker.waitForExit(timeout: 5)
        process.withLock { $0 = nil }
    }

    /// SIGSTOP: a hung broker. Its socket stays open and the kernel still accepts connections, but nothing answers.
    public func pause() { process.withLock { $0 }?.signal(SIGSTOP) }

    /// SIGCONT after `pause()`.
    public func resume() { process.withLock { $0 }?.signal(SIGCONT) }

    /// Writes the persistence database now (mosquitto's SIGUSR1), so sessions survive a SIGKILL. Returns whether the
    /// database file was (re)written within `timeout` seconds.
    @discardableResult
    public func saveSessions(timeout: Double = 15) -> Bool {
        guard let broker = process.withLock({ $0 }) else { return false }
        let db = directory.file("mosquitto.db")
        func written() -> Date? { (try? FileManager.default.attributesOfItem(atPath: db)[.modificationDate]) as? Date }
        let before = written()
        broker.signal(SIGUSR1)
        return eventually(timeout: timeout) {
            guard let now = written() else { return false }
            return before.map { now != $0 } ?? true
        }
    }

    /// The broker's log so far.
    public var log: [String] { process.withLock { $0 }?.outputLines ?? [] }

    /// Adds a user to a `password_file` (mosquitto_passwd writes the salted hash).
    public static func addUser(_ user: String, password: String, file: String) throws {
        let create = FileManager.default.fileExists(atPath: file) ? [] : ["-c"]
        let result = try ProcessRunner.run("/usr/bin/mosquitto_passwd", create + ["-b", file, user, password])
        guard result.status == 0 else { throw RigError("mosquitto_passwd failed: \(result.stderr)") }
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw RigError("no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// The test subscriber (Tests/Rigs/mqtt_sub.py): every message as (topic, payload), in arrival order.
public final class MQTTSubscriber: Sendable {
    public let process: RunningProcess

    public init(port: Int, topic: String, session: String? = nil, extra: [String] = []) throws {
        var arguments = [Products.rig("mqtt_sub.py"), "--port", String(port), "--topic", topic]
        if let session { arguments += ["--session", session] }
        process = try RunningProcess("/usr/bin/python3", arguments + extra)
        guard process.waitForLine(timeout: 15, where: { $0 == "SUBSCRIBED" }) != nil else {
            process.stop()
            throw RigError("test subscriber did not subscribe: \(process.stderrText)")
        }
    }

    deinit { stop() }

    public func stop() { process.stop() }

    public var messages: [(topic: String, payload: String)] {
        process.outputLines.compactMap { line in
            guard let tab = line.firstIndex(of: "\t") else { return nil }
            return (String(line[..<tab]), String(line[line.index(after: tab)...]))
        }
    }

    /// Waits (bounded) until at least `count` messages arrived (other output lines, such as the subscriber's
    /// connection reports, do not count).
    public func waitForMessages(_ count: Int, timeout: Double) -> Bool {
        var seen = 0
        return process.waitForLine(timeout: timeout) { line in
            if line.contains("\t") { seen += 1 }
            return seen >= count
        } != nil
    }

    /// Waits (bounded) until a message satisfies `predicate`; returns its payload.
    @discardableResult
    public func waitFor(timeout: Double, _ predicate: @escaping (String, String) -> Bool) -> String? {
        process.waitForLine(timeout: timeout) { line in
            guard let tab = line.firstIndex(of: "\t") else { return false }
            return predicate(String(line[..<tab]), String(line[line.index(after: tab)...]))
        }.map { line in line.split(separator: "\t", maxSplits: 1).dropFirst().first.map(String.init) ?? "" }
    }
}
