import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import Location
import Logging

/// `plings-bench location`: (a) the latency a fix adds to a read (`currentFix()` is a locked cache read; goal
/// < 10 µs), and (b) the CPU the gpsd client costs with 1 Hz and 10 Hz receivers (the real gpsd rig), measured
/// with getrusage over `--seconds` (default 60) each.
enum LocationBenchmark {
    static func run(arguments: [String]) {
        var seconds = 60.0
        var i = 0
        while i < arguments.count {
            if arguments[i] == "--seconds", i + 1 < arguments.count, let n = Double(arguments[i + 1]), n > 0 {
                seconds = n
            }
            i += 2
        }
        var rows: [BenchRow] = []
        let logger = Logger(minimum: .warn)

        // Baseline for (a): the fixed-location provider, which returns a stored value.
        let fixed = FixedFixProvider(fix: LocationFix(latitude: 59.3293, longitude: 18.0686, accuracy: 5))
        let fixedNs = nanosecondsPerCall(fixed)

        for rate in [1, 10] {
            guard let rig = Rig(rate: rate) else {
                FileHandle.standardError.write(Data("location: the gpsd rig did not start (run as root?)\n".utf8))
                exit(1)
            }
            defer { rig.stop() }
            var config = BridgeConfig().location
            config.gpsd = "127.0.0.1:\(rig.port)"
            let client = GPSClient(config: config, logger: logger)
            client.start()
            guard client.waitForFirstReport(timeout: 5), waitForFix(client, timeout: 5) else {
                FileHandle.standardError.write(Data("location: no fix from the rig at \(rate) Hz\n".utf8))
                exit(1)
            }
            if rate == 10 {
                // Measured while the client thread updates the cache 10 times a second (lock contention included).
                let ns = nanosecondsPerCall(client)
                rows.append(
                    BenchRow(
                        metric: "fix coupled to a read: GPSClient.currentFix() (10 Hz updates in the background)",
                        ours: ns / 1000, baseline: fixedNs / 1000, unit: "µs", goal: "< 10 µs", higherIsBetter: false))
                let both = FirstFixProvider([client, fixed])
                rows.append(
                    BenchRow(
                        metric: "fix coupled to a read: FirstFixProvider([gps, fixed])",
                        ours: nanosecondsPerCall(both) / 1000, baseline: fixedNs / 1000, unit: "µs", goal: "< 10 µs",
                        higherIsBetter: false))
            }
            let before = cpuSeconds()
            let wallStart = monotonic()
            Thread.sleep(forTimeInterval: seconds)
            let cpu = cpuSeconds() - before
            let wall = monotonic() - wallStart
            let fresh = client.currentFix() != nil
            client.stop()
            rows.append(
                BenchRow(
                    metric: "gpsd client CPU at \(rate) Hz over \(Int(wall)) s (user+sys; fix fresh at end: \(fresh))",
                    ours: cpu / wall * 100, baseline: nil, unit: "% of a core", goal: "< 1 %", higherIsBetter: false))
            rows.append(
                BenchRow(
                    metric: "gpsd client CPU per receiver cycle (TPV + SKY + GST) at \(rate) Hz",
                    ours: cpu / (wall * Double(rate)) * 1e6, baseline: nil, unit: "µs", goal: "info",
                    higherIsBetter: false))
        }
        BenchTable.print(rows)
    }

    static func waitForFix(_ client: GPSClient, timeout: Double) -> Bool {
        let deadline = monotonic() + timeout
        while monotonic() < deadline {
            if client.currentFix() != nil { return true }
            usleep(10_000)
        }
        return false
    }

    /// Median of 5 rounds of 1M calls (the result is consumed so the calls cannot be optimised away).
    static func nanosecondsPerCall(_ provider: any FixProvider) -> Double {
        let calls = 1_000_000
        var rounds: [Double] = []
        var sink = 0.0
        for _ in 0..<5 {
            let start = monotonic()
            for _ in 0..<calls { sink += provider.currentFix()?.latitude ?? 0 }
            rounds.append((monotonic() - start) / Double(calls) * 1e9)
        }
        if sink == 42 { print("") }
        return rounds.sorted()[2]
    }

    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// User + system CPU of this process; while the main thread sleeps, that is the gpsd client thread.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// The gpsd rig (Tests/Rigs/gps_rig.py) at a given rate, ended with `quit`.
    final class Rig {
        let process = Process()
        let input = Pipe()
        let output = Pipe()
        let port: Int

        init?(rate: Int) {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [
                Products.rig("gps_rig.py"), "--port", "0",
                "--rate", String(rate),
            ]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.standardError
            guard (try? process.run()) != nil else { return nil }
            // One line: READY port=N pty=... (or ERR and exit).
            var line = Data()
            while !line.contains(0x0A) {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                line.append(chunk)
            }
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix("READY"),
                let field = text.split(separator: " ").first(where: { $0.hasPrefix("port=") }),
                let port = Int(field.dropFirst(5))
            else {
                process.terminate()
                return nil
            }
            self.port = port
        }

        func stop() {
            guard process.isRunning else { return }
            try? input.fileHandleForWriting.write(contentsOf: Data("quit\n".utf8))
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }
}
