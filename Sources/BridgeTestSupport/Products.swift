import Foundation

/// Helpers for tests that run the real executables and rigs. Not linked into the product.
public enum Products {
    /// The package root (two levels above this file's `Sources/BridgeTestSupport`).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The built executable `name` from the same build directory as the running test bundle.
    public static func path(_ name: String) -> String {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [
            bundleDirectory.appendingPathComponent(name).path,
            packageRoot.appendingPathComponent(".build/debug/\(name)").path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[1]
    }

    /// How much longer hang guards wait under ThreadSanitizer (`scripts/tsan` sets TSAN_OPTIONS): instrumented
    /// processes run several times slower and TSan holds each exit for a second. Time bounds that are product
    /// promises (stop within 5 s) are checked by the normal run; under TSan they only guard against hangs.
    public static var timeScale: Double {
        ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil ? 5 : 1
    }

    /// A script or file under `Tests/Rigs`.
    public static func rig(_ relative: String) -> String {
        packageRoot.appendingPathComponent("Tests/Rigs/\(relative)").path
    }
}

/// A fresh directory under /tmp, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "plings-test") {
        path = NSTemporaryDirectory() + "\(label)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// The result of running a process to completion.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
}

/// A child with its three standard streams piped, set up the same way for `ProcessRunner` and
/// `RunningProcess` (which differ only in how they read the output: to EOF, or line by line while running).
struct PipedChild {
    let process = Process()
    let stdin = Pipe()
    let stdout = Pipe()
    let stderr = Pipe()

    init(_ executable: String, _ arguments: [String], environment: [String: String]?) {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
    }
}

public enum ProcessRunner {
    /// Runs `executable` with `arguments` and waits (bounded by `timeout` seconds; killed after it).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: String? = nil,
        timeout: Double = 60
    ) throws -> ProcessResult {
        let child = PipedChild(executable, arguments, environment: environment)
        let process = child.process
        let collector = OutputCollector()
        // Each stream is drained to EOF on its own thread: no reordering, nothing lost, no pipe-full deadlock.
        let drained = DispatchGroup()
        for (handle, append) in [
            (child.stdout.fileHandleForReading, collector.appendOut),
            (child.stderr.fileHandleForReading, collector.appendErr),
        ] {
            drained.enter()
            Thread {
                append(handle.readDataToEndOfFile())
                drained.leave()
            }.start()
        }
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        if let stdin { child.stdin.fileHandleForWriting.write(Data(stdin.utf8)) }
        try? child.stdin.fileHandleForWriting.close()
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            _ = exited.wait(timeout: .now() + 5)
        }
        _ = drained.wait(timeout: .now() + 10)
        return ProcessResult(status: process.terminationStatus, stdout: collector.out, stderr: collector.err)
    }
}

/// Collects a child's output from dispatch handlers.
public final class OutputCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var outData = Data()
    private var errData = Data()
    public init() {}
    public func appendOut(_ d: Data) { lock.withLock { outData.append(d) } }
    public func appendErr(_ d: Data) { lock.withLock { errData.append(d) } }
    public var out: String { lock.withLock { String(decoding: outData, as: UTF8.self) } }
    public var err: String { lock.withLock { String(decoding: errData, as: UTF8.self) } }
}

/// A long-running child whose stdout lines can be awaited (rigs print `READY`, writers print ids).
public final class RunningProcess: @unchecked Sendable {
    public let process: Process
    private let lock = NSCondition()
    private var lines: [String] = []
    private var partial = Data()
    private var errText = Data()
    private var closed = false
    private var terminated = false
    private let input: Pipe

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let child = PipedChild(executable, arguments, environment: environment)
        process = child.process
        input = child.stdin
        child.stdout.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            self?.receive(data)
        }
        child.stderr.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            self.lock.lock()
            self.errText.append(data)
            self.lock.broadcast()
            self.lock.unlock()
        }
        process.terminationHandler = { [weak self] _ in
            guard let self else { return }
            self.lock.lock()
            self.terminated = true
            self.lock.broadcast()
            self.lock.unlock()
        }
        try process.run()
    }

    private func receive(_ data: Data) {
        lock.lock()
        if data.isEmpty {
            closed = true
        } else {
            partial.append(data)
            while let newline = partial.firstIndex(of: 0x0A) {
                lines.append(String(decoding: partial[partial.startIndex..<newline], as: UTF8.self))
                partial.removeSubrange(partial.startIndex...newline)
            }
        }
        lock.broadcast()
        lock.unlock()
    }

    /// All stdout lines so far.
    public var outputLines: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }

    public var stderrText: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: errText, as: UTF8.self)
    }

    /// Waits (bounded) until a stdout line satisfies `predicate`; returns it, or nil on timeout or EOF.
    @discardableResult
    public func waitForLine(timeout: Double, where predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        var checked = 0
        while true {
            while checked < lines.count {
                if predicate(lines[checked]) { return lines[checked] }
                checked += 1
            }
            if closed { return nil }
            if !lock.wait(until: deadline) { return nil }
        }
    }

    /// Waits (bounded) until a stderr (log) line satisfies `predicate`; returns it, or nil on timeout or exit.
    @discardableResult
    public func waitForLogLine(timeout: Double, where predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while true {
            let text = String(decoding: errText, as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { predicate(String($0)) }) { return String(line) }
            if terminated || !lock.wait(until: deadline) { return nil }
        }
    }

    /// Waits (bounded) until at least `count` stdout lines arrived.
    public func waitForLineCount(_ count: Int, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while lines.count < count {
            if closed || !lock.wait(until: deadline) { return lines.count >= count }
        }
        return true
    }

    /// Sends a line on the child's stdin.
    public func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    public func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Signals the child's own children (e.g. the bridge that `umockdev-run` started: it does not forward
    /// signals).
    public func signalChildren(_ number: Int32) {
        let pid = process.processIdentifier
        let path = "/proc/\(pid)/task/\(pid)/children"
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        for child in text.split(separator: " ").compactMap({ Int32($0) }) { kill(child, number) }
    }

    /// Waits (bounded) for exit; returns the status, or nil when it is still running.
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        while !terminated {
            if !lock.wait(until: deadline) { break }
        }
        let done = terminated
        lock.unlock()
        return done ? process.terminationStatus : nil
    }

    /// Kills the child if it still runs.
    public func stop() {
        if process.isRunning {
            process.terminate()
            if waitForExit(timeout: 3) == nil { kill(process.processIdentifier, SIGKILL) }
        }
        try? input.fileHandleForWriting.close()
    }

    deinit { stop() }
}
