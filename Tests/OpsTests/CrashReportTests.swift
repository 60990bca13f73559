import BridgeTestSupport
import Foundation
import Glibc
import Platform
import Testing

/// A bridge that dies of a signal while a test holds its output (issue 46). Swift's runtime answers a fatal signal
/// by starting `swift-backtrace` as a child of the crashed process, in its process group, with its standard output
/// and error. A harness that then kills the bridge (a power cut, a fault) orphaned that backtracer, which waited on
/// its dead parent and held the pipes open: a read to their end never finished.
@Suite struct CrashReportTests {
    let binary = Products.path("plings-bridge")

    /// The children of `pid` (from /proc), e.g. the backtracer the runtime started. Each thread's `children` file
    /// lists only the children that thread made (proc(5)), and a signal sent with kill(2) is handled on whichever
    /// thread the kernel picks, so every thread's file is read (the main thread's alone missed the backtracer when
    /// another thread took the signal, a CI failure).
    func children(of pid: pid_t) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task -> [pid_t] in
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            return text.split(separator: " ").compactMap { pid_t($0) }
        }
    }

    /// The live processes whose process group is `group` (field 5 of /proc/PID/stat).
    func members(ofGroup group: pid_t) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { $0.allSatisfy(\.isNumber) }.compactMap { pid -> String? in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // A zombie holds no descriptor: only processes still able to hold the pipes count.
            guard fields.count > 2, fields[0] != "Z", pid_t(fields[2]) == group else { return nil }
            let name = stat[stat.index(after: stat.firstIndex(of: "(") ?? stat.startIndex)..<close]
            return "\(pid) \(name)"
        }
    }

    /// Not under ThreadSanitizer: its own handler takes the fatal signal (and reports it), so no Swift crash reporter
    /// starts there.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["TSAN_OPTIONS"] == nil))
    func aBridgeKilledWhileItsCrashReportIsWrittenLeavesNothingHoldingItsOutput() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var env = OpsTests().environment(dir)
        // Full symbolication takes long enough (about a second on a debug build) to kill the bridge mid-report.
        env["SWIFT_BACKTRACE"] = "enable=yes,interactive=no,symbolicate=full,output-to=stderr"
        let bridge = try RunningProcess(
            binary, ["run", "--no-nfc", "--no-hid", "--no-hidpos", "--no-serial", "--no-location"], environment: env)
        defer { bridge.stop() }
        let scale = Products.timeScale
        #expect(bridge.waitForLogLine(timeout: 20 * scale) { $0.contains("ready") } != nil, "\(bridge.stderrText)")
        let pid = bridge.process.processIdentifier

        // A fatal signal: the runtime starts its crash reporter as a child.
        kill(pid, SIGBUS)
        var reporter: pid_t?
        let deadline = MonotonicClock.deadline(after: 10 * scale)
        while reporter == nil, MonotonicClock.now() < deadline {
            reporter = children(of: pid).first
            if reporter == nil { usleep(10_000) }
        }
        let started = try #require(reporter, "no crash reporter started: \(bridge.stderrText)")
        // Then the harness's SIGKILL, to the bridge alone, as a power cut test sends it.
        kill(pid, SIGKILL)
        #expect(bridge.waitForExit(timeout: 5 * scale) == SIGKILL)

        // Ending the bridge the way every test does also ends what its group still holds: the output ends within
        // the bound, and nothing of the group is left.
        bridge.stop()
        #expect(bridge.waitForOutputEnd(timeout: 5 * scale), "the crash reporter \(started) still holds the output")
        #expect(members(ofGroup: pid).isEmpty, "left behind: \(members(ofGroup: pid))")
        #expect(bridge.stderrText.contains("*** Signal 7: Backtracing"), "\(bridge.stderrText)")
    }
}

/// One thread shape (issue 38): a worker of any part that ends although nobody asked it to stops the service with a
/// non-zero exit and a log line naming it, so systemd's Restart= starts it again. Each worker is ended in turn
/// through the debug builds' seam (`PLINGS_TEST_END_WORKER`, `WorkerThread`).
@Suite struct WorkerEndTests {
    let binary = Products.path("plings-bridge")

    @Test func eachWorkerThatEndsOnItsOwnStopsTheServiceNamingIt() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        // Nothing answers on port 9, and no port is /dev/ttyNONE: the API's sink, the broker client, the webhook and
        // the serial source start their threads all the same.
        let config = try WorkerEndTests.config(dir, brokerPort: 9)
        let workers = [
            "pipeline", "spool-watch", "status", "retention", "spool-check", "gpsd", "hid-reader", "hidpos-reader",
            "serial-reader",
            "nfc-pcsc", "nfc-feedback", "api", "api-0", "mqtt", "mqtt-0", "mqtt-network", "mqtt-status", "webhook",
            "http-feed",
            "http-retry",
        ]
        let results = WorkerEndTests.runEach(workers, config: config, dir: dir) { worker in
            // The local interface on a port of its own, so its workers (http-feed, http-retry) run too.
            let port = (try? ListeningSocket.freePort()) ?? 1
            return OpsTests().environment(
                dir, ["PLINGS_TEST_END_WORKER": worker, "PLINGS_BRIDGE_HTTP_LISTEN": "127.0.0.1:\(port)"])
        }
        for worker in workers {
            let result = results[worker]
            #expect(result?.status == 1, "\(worker): exit \(result?.status ?? -1)\n\(result?.stderr ?? "")")
            let line = result?.stderr.split(separator: "\n").first { $0.contains("stopped on its own") } ?? ""
            #expect(line.hasPrefix("level=error") && line.hasSuffix("worker=\(worker)"), "\(worker): \(line)")
        }
    }

    /// A config whose API, broker (on `brokerPort`), webhook and serial source are set, so every worker runs.
    static func config(_ dir: TemporaryDirectory, brokerPort: Int) throws -> String {
        let token = dir.file("token")
        try "worker-test-token-0123456789\n".write(toFile: token, atomically: true, encoding: .utf8)
        chmod(token, 0o600)
        let config = dir.file("config.json")
        try #"""
        {"api": {"url": "http://127.0.0.1:9/graphql", "tokenFile": "\#(token)", "allowInsecureHTTP": true},
         "mqtt": {"url": "mqtt://127.0.0.1:\#(brokerPort)", "allowInsecure": true, "deviceId": "gate7"},
         "webhook": {"url": "http://127.0.0.1:9/hook"}, "serial": {"match": [{"devnode": "/dev/ttyNONE*"}]}}
        """#.write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    /// Runs `run` once per worker, two at a time (the cores), each with the environment `environment` gives it and a
    /// spool of its own; the results by worker.
    static func runEach(
        _ workers: [String], config: String, dir: TemporaryDirectory,
        environment: @escaping @Sendable (String) -> [String: String]
    ) -> [String: ProcessResult] {
        let results = Mutex<[String: ProcessResult]>([:])
        DispatchQueue.concurrentPerform(iterations: workers.count) { index in
            let worker = workers[index]
            let result = try? ProcessRunner.run(
                Products.path("plings-bridge"), ["run", "--config", config, "--spool", dir.file("\(worker).sqlite")],
                environment: environment(worker), timeout: 30 * Products.timeScale)
            results.withLock { $0[worker] = result }
        }
        return results.withLock { $0 }
    }
}

/// The watchdog covers every watched worker (issue 38): one hung in a call that never returns (a request, a lock)
/// stops the service with a non-zero exit and a line naming it, so systemd starts it again; an idle one, asleep in
/// its wait for work however long, is never called stuck. Hangs come through the debug builds' seam
/// (`PLINGS_TEST_HANG_WORKER`), with the limit shortened to 3 s (`PLINGS_TEST_WATCH_LIMIT`; 15 s under
/// ThreadSanitizer, where a loaded machine may take seconds to start a worker).
@Suite struct WorkerHangTests {
    let binary = Products.path("plings-bridge")
    let watchLimit = 3 * Products.timeScale

    func environment(_ dir: TemporaryDirectory, notify: String, _ extra: [String: String]) -> [String: String] {
        let port = (try? ListeningSocket.freePort()) ?? 1
        return OpsTests().environment(
            dir,
            [
                "NOTIFY_SOCKET": notify, "WATCHDOG_USEC": "2000000", "PLINGS_TEST_WATCH_LIMIT": String(watchLimit),
                "PLINGS_BRIDGE_HTTP_LISTEN": "127.0.0.1:\(port)",
            ].merging(extra) { $1 })
    }

    @Test func eachWatchedWorkerThatHangsStopsTheServiceNamingIt() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let config = try WorkerEndTests.config(dir, brokerPort: 9)
        let workers = [
            "pipeline", "status", "api", "api-0", "mqtt", "mqtt-0", "mqtt-network", "mqtt-status", "webhook",
            "http-feed",
            "http-retry", "spool-watch", "hid-reader", "hidpos-reader", "serial-reader", "nfc-pcsc", "gpsd",
        ]
        // The watchdog's pings go nowhere here (no socket at that path): the exit and its line are what count.
        let results = WorkerEndTests.runEach(workers, config: config, dir: dir) { worker in
            environment(dir, notify: dir.file("no-notify-socket"), ["PLINGS_TEST_HANG_WORKER": worker])
        }
        for worker in workers {
            let result = results[worker]
            #expect(result?.status == 1, "\(worker): exit \(result?.status ?? -1)\n\(result?.stderr ?? "")")
            let line = result?.stderr.split(separator: "\n").first { $0.contains("is stuck") } ?? ""
            #expect(line.hasPrefix("level=error") && line.contains("worker=\(worker) "), "\(worker): \(line)")
        }
    }

    /// Every watched worker idle (a broker connected and quiet, nothing to deliver, no scanner, no gpsd, the NFC
    /// reader waiting for pcscd or a card) for well past the limit: the watchdog keeps pinging and nothing is called
    /// stuck.
    @Test func idleWorkersAreNeverStuck() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let broker = try MosquittoRig()
        defer { broker.kill() }
        let config = try WorkerEndTests.config(dir, brokerPort: broker.port)
        let notify = try NotifySocket(path: dir.file("notify"))
        let bridge = try RunningProcess(
            binary, ["run", "--config", config, "--spool", dir.file("s.sqlite")],
            environment: environment(dir, notify: notify.path, [:]))
        defer { bridge.stop() }
        #expect(
            bridge.waitForLogLine(timeout: 20 * Products.timeScale) { $0.contains("mqtt: connected; publishing") }
                != nil)
        // Two and a half limits of quiet, while the broker connection sits in libmosquitto's loop.
        var pings = 0
        let window = 2.5 * watchLimit
        let until = MonotonicClock.deadline(after: window)
        while MonotonicClock.now() < until, let message = notify.receive(timeout: until - MonotonicClock.now()) {
            if message == "WATCHDOG=1" { pings += 1 }
        }
        #expect(Double(pings) >= window / 2, "\(pings) watchdog pings in \(window) s")
        #expect(bridge.process.isRunning)
        #expect(!bridge.stderrText.contains("is stuck"), "\(bridge.stderrText)")
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }
}
