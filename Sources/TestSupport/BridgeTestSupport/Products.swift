import Foundation
import Platform

/// Helpers for tests that run the real executables and rigs. Not linked into the product.
public enum Products {
    /// The package root (three levels above this file's `Sources/TestSupport/BridgeTestSupport`).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

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

    /// The environment of a bridge under test: this process's without `PLINGS_BRIDGE_*` (a developer's own
    /// settings) and systemd's state, credential, runtime, notify and watchdog settings, with `HOME` and
    /// `XDG_STATE_HOME` in `home`, and `SWIFT_BACKTRACE` set.
    ///
    /// Unless `reachesPCSCD`, libpcsclite is pointed at a socket in `home` that does not exist
    /// (`PCSCLITE_CSOCK_NAME`): the machine's pcscd is the NFC rig's, and a bridge of another suite with its
    /// default `nfc.enabled` would otherwise read the rig's card while an NFC test reads it, interleaving APDUs
    /// (one CI run failed so: the other bridge's SELECT reset the card's current file between the test's
    /// SELECT and READ BINARY). Only tests serialized in `NFCRigTests` may reach it.
    ///
    /// Unless `listensHTTP`, the local interface is off (`PLINGS_BRIDGE_HTTP_LISTEN` empty, which overrides any
    /// config file): its default is one fixed loopback port, which bridges of suites running at once would
    /// contend for, and a `doctor` would probe whichever test's bridge holds it.
    public static func isolatedEnvironment(home: String, reachesPCSCD: Bool = false, listensHTTP: Bool = false)
        -> [String: String]
    {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PLINGS_BRIDGE_") }
        env["HOME"] = home
        env["XDG_STATE_HOME"] = home + "/state"
        for key in ["STATE_DIRECTORY", "CREDENTIALS_DIRECTORY", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET", "WATCHDOG_USEC"] {
            env.removeValue(forKey: key)
        }
        if reachesPCSCD {
            env.removeValue(forKey: "PCSCLITE_CSOCK_NAME")
        } else {
            env["PCSCLITE_CSOCK_NAME"] = home + "/no-pcscd.comm"
        }
        if !listensHTTP { env["PLINGS_BRIDGE_HTTP_LISTEN"] = "" }
        // Swift's crash report, set explicitly: not interactive, symbols only (no line tables: written in a
        // fraction of a second), on stderr, where the test that saw the crash shows it.
        env["SWIFT_BACKTRACE"] = "enable=yes,interactive=no,symbolicate=fast,output-to=stderr"
        return env
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
    let process: ChildProcess
    let stdin = Pipe()
    let stdout = Pipe()
    let stderr = Pipe()

    init(_ executable: String, _ arguments: [String], environment: [String: String]?) {
        process = ChildProcess(
            executable, arguments, environment: environment, stdin: stdin, stdout: stdout, stderr: stderr)
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
            if exited.wait(timeout: .now() + 5) == .timedOut { process.killGroup() }
            _ = exited.wait(timeout: .now() + 5)
        }
        _ = drained.wait(timeout: .now() + 10)
        return ProcessResult(status: process.terminationStatus, stdout: collector.out, stderr: collector.err)
    }
}

/// Collects a child's output from dispatch handlers.
public final class OutputCollector: Sendable {
    private let data = Mutex((out: Data(), err: Data()))
    public init() {}
    public func appendOut(_ d: Data) { data.withLock { $0.out.append(d) } }
    public func appendErr(_ d: Data) { data.withLock { $0.err.append(d) } }
    public var out: String { data.withLock { String(decoding: $0.out, as: UTF8.self) } }
    public var err: String { data.withLock { String(decoding: $0.err, as: UTF8.self) } }
}

/// A long-running child whose stdout lines and stderr log can be awaited (rigs print `READY`, writers print ids).
///
/// Every wait sleeps on one monitor signalled by each piece of output and by the exit, against a monotonic
/// deadline: no re-check loops, and a wall-clock step cannot stretch a test's bound.
public final class RunningProcess: Sendable {
    /// What the child said so far and whether it is gone.
    private struct Output {
        var lines: [String] = []
        var partial: [UInt8] = []
        var errText: [UInt8] = []
        var closed = false
        var errClosed = false
        var terminated = false
    }

    public let process: ChildProcess
    private let output = Monitor(Output())
    private let input: Pipe

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let child = PipedChild(executable, arguments, environment: environment)
        process = child.process
        input = child.stdin
        let output = self.output
        // At the end of a pipe the handler gets empty data, and Foundation on Linux keeps calling it while it is
        // set: each handler removes itself there.
        child.stdout.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil }
            output.update { state in
                if data.isEmpty {
                    state.closed = true
                    return
                }
                state.partial.append(contentsOf: data)
                while let newline = state.partial.firstIndex(of: 0x0A) {
                    state.lines.append(String(decoding: state.partial[..<newline], as: UTF8.self))
                    state.partial.removeSubrange(...newline)
                }
            }
        }
        child.stderr.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil }
            output.update { state in
                if data.isEmpty { state.errClosed = true } else { state.errText.append(contentsOf: data) }
            }
        }
        process.terminationHandler = { _ in output.update { $0.terminated = true } }
        try process.run()
    }

    /// All stdout lines so far.
    public var outputLines: [String] { output.withLock { $0.lines } }

    public var stderrText: String { output.withLock { String(decoding: $0.errText, as: UTF8.self) } }

    /// Waits (bounded) until a stdout line satisfies `predicate`; returns it, or nil on timeout or EOF.
    @discardableResult
    public func waitForLine(timeout: Double, where predicate: (String) -> Bool) -> String? {
        var checked = 0
        var found: String?
        output.wait(until: MonotonicClock.deadline(after: timeout)) { state in
            while checked < state.lines.count {
                if predicate(state.lines[checked]) {
                    found = state.lines[checked]
                    return true
                }
                checked += 1
            }
            return state.closed
        }
        return found
    }

    /// Waits (bounded) until a stderr (log) line satisfies `predicate`; returns it, or nil on timeout or exit.
    @discardableResult
    public func waitForLogLine(timeout: Double, where predicate: (String) -> Bool) -> String? {
        var found: String?
        waitForLog(timeout: timeout) { text in
            found = text.split(separator: "\n").first { predicate(String($0)) }.map(String.init)
            return found != nil
        }
        return found
    }

    /// Waits (bounded) until the whole stderr text so far satisfies `predicate` (e.g. holds N acknowledgements);
    /// false on timeout or when the child exited without it.
    @discardableResult
    public func waitForLog(timeout: Double, until predicate: (String) -> Bool) -> Bool {
        var held = false
        output.wait(until: MonotonicClock.deadline(after: timeout)) { state in
            held = predicate(String(decoding: state.errText, as: UTF8.self))
            return held || state.terminated
        }
        return held
    }

    /// Waits (bounded) until at least `count` stdout lines arrived.
    public func waitForLineCount(_ count: Int, timeout: Double) -> Bool {
        var arrived = false
        output.wait(until: MonotonicClock.deadline(after: timeout)) { state in
            arrived = state.lines.count >= count
            return arrived || state.closed
        }
        return arrived
    }

    /// Sends a line on the child's stdin.
    public func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Signals the child while it runs (once reaped, its pid may already be another test's child).
    public func signal(_ number: Int32) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, number)
    }

    /// CPU time the child has used so far (user + system, in clock ticks of 10 ms), from /proc; 0 once it is gone.
    public var cpuTicks: Int { CPUTime.ticks(statPath: "/proc/\(process.processIdentifier)/stat") }

    /// Context switches of each of the child's threads so far (voluntary and not, from /proc/PID/task/*/status), by
    /// thread id: each is a wake-up of a thread, so their growth over an idle minute says how often the process is
    /// woken. Compare per thread: a thread that ends takes its count with it.
    public var contextSwitchesByThread: [Int: Int] {
        let pid = process.processIdentifier
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var counts: [Int: Int] = [:]
        for task in tasks {
            guard let tid = Int(task) else { continue }
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            counts[tid] = status.split(separator: "\n").reduce(0) { sum, line in
                guard line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:")
                else { return sum }
                return sum + (Int(line.split(separator: "\t").last ?? "") ?? 0)
            }
        }
        return counts
    }

    /// Signals the child's own children (e.g. the bridge that `umockdev-run` started: it does not forward
    /// signals).
    public func signalChildren(_ number: Int32) {
        let pid = process.processIdentifier
        let path = "/proc/\(pid)/task/\(pid)/children"
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        for child in text.split(separator: " ").compactMap({ Int32($0) }) { kill(child, number) }
    }

    /// Waits (bounded) for exit; returns the status, or nil when it is still running.
    /// After the exit it also waits (up to 2 s more) for both pipes' end, so `outputLines` and `stderrText` hold
    /// everything the child wrote; a grandchild that keeps a pipe open only costs that bound.
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = MonotonicClock.deadline(after: timeout)
        guard output.wait(until: deadline, for: { $0.terminated }) else { return nil }
        output.wait(until: MonotonicClock.deadline(after: 2)) { $0.closed && $0.errClosed }
        return process.terminationStatus
    }

    /// Ends the child if it still runs (SIGTERM, after 3 s SIGKILL), then whatever is left of its process group: a
    /// crash reporter it started when it died of a signal would otherwise hold its output open.
    public func stop() {
        if process.isRunning {
            process.terminate()
            if waitForExit(timeout: 3) == nil {
                process.killGroup()
                _ = waitForExit(timeout: 5)
            }
        }
        process.killGroup()
        try? input.fileHandleForWriting.close()
    }

    /// Whether both of the child's output pipes reached their end (nothing holds them open any more).
    public var outputClosed: Bool { output.withLock { $0.closed && $0.errClosed } }

    /// Waits (bounded) until both output pipes reached their end; false on timeout.
    public func waitForOutputEnd(timeout: Double) -> Bool {
        output.wait(until: MonotonicClock.deadline(after: timeout)) { $0.closed && $0.errClosed }
    }

    /// SIGKILL to the child's whole process group (it and, say, the crash reporter its runtime started).
    public func killGroup() { process.killGroup() }

    deinit { stop() }
}
