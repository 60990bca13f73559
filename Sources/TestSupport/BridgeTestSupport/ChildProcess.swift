import CSysShim
import Foundation
import Glibc
import Platform

/// A child process started with `posix_spawn`, for the tests and rigs: the few things of Foundation's `Process`
/// they use (pid, running, status, terminate, a termination handler) and its standard streams on `Pipe`s.
///
/// Not Foundation's `Process`: on Linux its `run()` reads `/proc/self/fd` to find the descriptors to close in the
/// child and over-reads glibc's `readdir` buffer (swift-corelibs-foundation PR #5472), so a test process with
/// many descriptors open crashed now and then in `Process.run()` (twice in three full runs here). This closes
/// every descriptor above 2 in the child with `posix_spawn_file_actions_addclosefrom_np`, and also starts the child
/// with no signal blocked (a test runner's thread blocks some, and a mask is inherited across exec).
///
/// Each child leads a process group of its own, and `killGroup()` ends the whole group. When a Swift program gets a
/// fatal signal, its runtime starts `swift-backtrace` in its group, holding its standard output and error; a test
/// that then killed the program alone left that backtracer behind, and a read of the output waited on it
/// (issue 46).
public final class ChildProcess: Sendable {
    private struct State {
        var pid: pid_t = 0
        var running = false
        var status: Int32 = 0
        var handler: (@Sendable (ChildProcess) -> Void)?
    }

    private let executable: String
    private let arguments: [String]
    private let environment: [String: String]?
    private let standardInput: Pipe
    private let standardOutput: Pipe
    private let standardError: Pipe
    private let state = Monitor(State())

    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]?, stdin: Pipe, stdout: Pipe,
        stderr: Pipe
    ) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        standardInput = stdin
        standardOutput = stdout
        standardError = stderr
    }

    /// Called once, on the reaper thread, when the child has exited (set it before `run()`).
    public var terminationHandler: (@Sendable (ChildProcess) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    public var processIdentifier: Int32 { state.withLock { $0.pid } }
    public var isRunning: Bool { state.withLock { $0.running } }
    /// The exit status, or the number of the signal that ended it (as Foundation's `Process` reports it).
    public var terminationStatus: Int32 { state.withLock { $0.status } }

    public func terminate() {
        let pid = state.withLock { $0.running ? $0.pid : 0 }
        if pid > 0 { kill(pid, SIGTERM) }
    }

    /// SIGKILL to the child's process group: the child and anything it started there (a crash reporter) end. Also
    /// after the child was reaped, while others of its group live on.
    public func killGroup() {
        let pid = state.withLock { $0.pid }
        if pid > 0 { kill(-pid, SIGKILL) }
    }

    private static let ignoreSIGPIPEOnce: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Starts the child and a thread that waits for its exit.
    public func run() throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, standardInput.fileHandleForReading.fileDescriptor, 0)
        posix_spawn_file_actions_adddup2(&actions, standardOutput.fileHandleForWriting.fileDescriptor, 1)
        posix_spawn_file_actions_adddup2(&actions, standardError.fileHandleForWriting.fileDescriptor, 2)
        guard plings_spawn_close_from(&actions, 3) == 0 else { throw RigError("posix_spawn: no closefrom") }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        // SIGPIPE: ignored here, so a test writing to a child that has died fails with EPIPE instead of the
        // signal ending every suite of the run; default again in the child (an ignored signal stays ignored
        // across exec), which then behaves as it would started from a shell.
        _ = ChildProcess.ignoreSIGPIPEOnce
        var pipe = sigset_t()
        sigemptyset(&pipe)
        sigaddset(&pipe, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &pipe)
        // Group 0: a new process group whose id is the child's pid (`killGroup()`).
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") }
        let envp = variables + [nil]
        defer { variables.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw RigError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        // The child's ends belong to the child now: the parent's copies would keep its stdin open and hide the
        // end of its output.
        try? standardInput.fileHandleForReading.close()
        try? standardOutput.fileHandleForWriting.close()
        try? standardError.fileHandleForWriting.close()
        let child = pid
        state.withLock {
            $0.pid = child
            $0.running = true
        }
        // Detached (Foundation's `Thread`): nobody joins a reaper, it ends with its child.
        let reaper = Thread { [self] in
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1 && errno == EINTR {}
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
            let code = status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
            let handler = state.update { s -> (@Sendable (ChildProcess) -> Void)? in
                s.status = code
                s.running = false
                return s.handler
            }
            handler?(self)
        }
        reaper.name = "reap-\(child)"
        reaper.start()
    }
}
