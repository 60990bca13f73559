import BridgeCore
import BridgeTestSupport
import CSQLite
import Foundation
import Platform
import Spool

/// A year of scans costs what a day does (issue 22): commit latency and CLI times on spools of 0, 100,000 and
/// 1,000,000 scans, each against the empty spool's figure, and the longest commit stall while `spool purge`
/// deletes 600,000 of them.
enum SpoolScaleBenchmark {
    static func run(arguments: [String]) {
        var sizes = [0, 100_000, 1_000_000]
        var directory = NSTemporaryDirectory()
        var i = 0
        while i + 1 < arguments.count {
            if arguments[i] == "--sizes" {
                sizes = arguments[i + 1].split(separator: ",").compactMap { Int($0) }
            }
            if arguments[i] == "--dir" { directory = arguments[i + 1] }
            i += 2
        }
        let binary = Products.path("plings-bridge")
        var rows: [BenchRow] = []
        var empty: [String: Double] = [:]
        for size in sizes {
            let path = "\(directory)/bench-scale-\(size).sqlite"
            SpoolBenchmark.remove(path)
            defer { SpoolBenchmark.remove(path) }
            guard fill(path, count: size) else {
                print("spool scale: cannot build a spool of \(size) scans")
                return
            }
            var figures: [(String, Double)] = []
            figures.append(("commit, median ms", commitLatency(path, samples: 200)))
            for (name, command) in [
                ("`scan`", ["scan", "--no-location", "https://s.plings.io/?t=q&i=\(benchIdentifier("Scale", 1))&p=1"]),
                ("`spool stats`", ["spool", "stats"]),
                ("`spool list --last 100`", ["spool", "list", "--last", "100"]),
            ] {
                figures.append((name + ", median ms", cliTime(binary, command + ["--spool", path])))
            }
            figures.append(("status refresh (spool and sink stats), median ms", statusWork(path)))
            figures.append(
                (
                    "local interface reads (`/scans?newest=100`, 500 after a mid position; the 0 row: 1,000 scans), median ms",
                    size == 0 ? fullPageFeedReads(directory: directory) : feedReads(path)
                ))
            figures.append(
                ("`run`: start -> ready, median ms", startToReady(binary, spool: path, directory: directory)))
            if size > 0, leaveHotWAL(path, scans: 5000) {
                figures.append(
                    (
                        "`run` after a power cut (5,000 scans in a hot WAL): start -> ready, ms",
                        startToReady(binary, spool: path, directory: directory, runs: 1)
                    ))
            }
            for (name, value) in figures {
                if size == 0 { empty[name] = value }
                // The start after a power cut is held against the start on an empty spool.
                let baseline =
                    empty[name] ?? (name.hasPrefix("`run` after") ? empty["`run`: start -> ready, median ms"] : nil)
                    ?? value
                rows.append(
                    BenchRow(
                        metric: "spool of \(size.formatted()) scans: \(name)", ours: value, baseline: baseline,
                        unit: "ms", goal: size == 0 ? "info" : "<= 2 x the empty spool", higherIsBetter: false))
            }
        }
        if let largest = sizes.max(), largest >= 600_000 {
            rows += purgeStall(directory: directory, size: largest, purge: 600_000)
        }
        BenchTable.print(rows)
    }

    /// A spool of `count` delivered scans, 30 s apart over the last `count` x 30 s: made with one SQL statement
    /// (the spool's own schema, opened and migrated by `Spool` first), then checkpointed and its WAL truncated,
    /// as a long-running box's would be.
    static func fill(_ path: String, count: Int) -> Bool {
        guard (try? Spool(path: path)) != nil else { return false }
        guard count > 0 else { return true }
        // Committed pending, as the pipeline commits them (the trigger queues each for the API), then delivered.
        return fill(
            path, count: count, state: "pending",
            then: """
                UPDATE sink_queue SET state = 'delivered', attempts = 1,
                    delivered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', (\(count) - seq) * 30))
                WHERE sink = '\(Spool.apiSink)';
                """)
    }

    /// A spool of schema `version` (an older release's; the API's state in `scans` before schema 8) holding
    /// `count` delivered scans, built with the schema's own migrations: what a migration benchmark starts from.
    static func fillOlder(_ path: String, version: Int, count: Int) -> Bool {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { return false }
        let created =
            sqlite3_exec(
                db,
                "PRAGMA journal_mode = WAL; BEGIN;" + Schema.migrations[0..<version].joined()
                    + "PRAGMA user_version = \(version); COMMIT;", nil, nil, nil) == SQLITE_OK
        sqlite3_close(db)
        return created && fill(path, count: count, state: "delivered", then: "")
    }

    /// Inserts `count` scans of one state in one transaction with `synchronous=OFF`, runs `then` in it, and syncs.
    private static func fill(_ path: String, count: Int, state: String, then: String) -> Bool {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { return false }
        defer { sqlite3_close(db) }
        let sql = """
            PRAGMA synchronous = OFF;
            BEGIN;
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
            INSERT INTO scans (id, created_at, state, source_kind, device, raw, input, identifier, attempts,
                               delivered_at)
            SELECT printf('00000000-0000-4000-8000-%012d', i),
                strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', (\(count) - i) * 30 + 60)), '\(state)',
                'hid', 'bench', 'https://s.plings.io/?t=q&i=S' || (i % 5000) || '&p=4.2.3',
                '{"type":"q","identifier":"S' || (i % 5000) || '","path":"4.2.3"}', 'S' || (i % 5000),
                CASE '\(state)' WHEN 'delivered' THEN 1 ELSE 0 END,
                CASE '\(state)' WHEN 'delivered' THEN
                    strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', (\(count) - i) * 30)) END
            FROM n;
            \(then)
            COMMIT;
            PRAGMA wal_checkpoint(TRUNCATE);
            """
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { return false }
        // Written with synchronous=OFF: flush it now, or the kernel's writeback of a few hundred MB would stall
        // the fsyncs measured next (a year-old spool is on disk, not in dirty pages).
        sync()
        return true
    }

    static func median(_ values: [Double]) -> Double { values.isEmpty ? .nan : values.sorted()[values.count / 2] }

    /// One durable commit of one scan, as the pipeline makes it after a tap.
    static func commitLatency(_ path: String, samples: Int) -> Double {
        guard let spool = try? Spool(path: path) else { return .nan }
        let scans = SpoolBenchmark.makeScans(samples)
        var times: [Double] = []
        for scan in scans {
            let start = MonotonicClock.now()
            try? spool.insert([scan])
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    /// A CLI command from process start to exit, median of 7.
    static func cliTime(_ binary: String, _ arguments: [String]) -> Double {
        timedSpawns(binary, arguments, runs: 7) { pid in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            return MonotonicClock.now()
        }
    }

    /// `plings-bridge run` (no source, no location) from its spawn to `READY=1` on a notify socket, as systemd sees
    /// it; the median of `runs` starts. Issue 27: a gate must read again soon after a power cut.
    static func startToReady(_ binary: String, spool: String, directory: String, runs: Int = 5) -> Double {
        let socketPath = "\(directory)/bench-notify-\(getpid())"
        unlink(socketPath)
        defer { unlink(socketPath) }
        guard let notify = try? NotifySocket(path: socketPath) else { return .nan }
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = socketPath
        let arguments = [
            "run", "--spool", spool, "--no-nfc", "--no-hid", "--no-hidpos", "--no-serial", "--no-location",
        ]
        return timedSpawns(binary, arguments, environment: environment, runs: runs) { pid in
            defer {
                kill(pid, SIGTERM)
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            }
            while let message = notify.receive(timeout: 30) {
                if message.hasPrefix("READY=1") { return MonotonicClock.now() }
            }
            return nil
        }
    }

    /// Spawns `binary` `runs` times (its output to /dev/null) and times each from the spawn to the moment `reached`
    /// returns (it waits for that moment and reaps the child; nil: never reached); the median in ms. posix_spawn
    /// and waitpid: Foundation's `waitUntilExit` notices an exit only on a 50 ms tick, most of these figures.
    static func timedSpawns(
        _ binary: String, _ arguments: [String], environment: [String: String]? = nil, runs: Int,
        _ reached: (pid_t) -> Double?
    ) -> Double {
        let argv = ([binary] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") }
        defer { variables.forEach { free($0) } }
        let envp = variables + [nil]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var times: [Double] = []
        for _ in 0..<runs {
            var pid: pid_t = 0
            let start = MonotonicClock.now()
            guard posix_spawn(&pid, binary, &actions, nil, argv, envp) == 0 else { return .nan }
            if let end = reached(pid) { times.append((end - start) * 1000) }
        }
        return median(times)
    }

    /// Leaves `scans` more pending scans in the spool's write-ahead log and no checkpoint, as a power cut right
    /// after a busy minute does: a child process commits them with automatic checkpoints off, then kills itself.
    static func leaveHotWAL(_ path: String, scans: Int) -> Bool {
        let script = """
            import os, sqlite3, sys
            con = sqlite3.connect(sys.argv[1], isolation_level=None)
            con.execute("PRAGMA wal_autocheckpoint = 0")
            con.execute("BEGIN")
            for i in range(int(sys.argv[2])):
                con.execute("INSERT INTO scans (id, created_at, state, source_kind, device, raw, identifier, attempts) "
                            "VALUES (printf('hot-%d', ?), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'pending', 'hid', "
                            "'bench', 'https://s.plings.io/?t=q&i=Hot&p=1', 'Hot', 0)", (i,))
            con.execute("COMMIT")
            os.kill(os.getpid(), 9)
            """
        let result = try? ProcessRunner.run("/usr/bin/python3", ["-c", script, path, String(scans)])
        let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return result != nil && wal > 0
    }

    /// What each refresh of `status.json` and the metrics reads from the spool.
    static func statusWork(_ path: String) -> Double {
        guard let spool = try? Spool(path: path) else { return .nan }
        var times: [Double] = []
        for _ in 0..<21 {
            let start = MonotonicClock.now()
            _ = try? spool.stats()
            _ = try? spool.sinkStats()
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    /// What the local interface reads (issue 25) on a read-only connection: the last sequence number, the newest 100
    /// (the bench page's first load) and a page of 500 after a position in the middle (a client catching up).
    static func feedReads(_ path: String) -> Double {
        guard let spool = try? Spool.openIfExists(path: path) else { return .nan }
        let last = (try? spool.lastSeq()) ?? 0
        var times: [Double] = []
        for _ in 0..<21 {
            let start = MonotonicClock.now()
            _ = try? spool.lastSeq()
            _ = try? spool.newestScans(100)
            _ = try? spool.scans(after: last / 2, limit: 500)
            times.append((MonotonicClock.now() - start) * 1000)
        }
        return median(times)
    }

    /// The local interface reads' baseline: an empty spool returns no rows, so the pages a large spool returns would
    /// be held against no work at all. A day's spool (1,000 scans) fills both pages; it is the fair "empty" figure.
    static func fullPageFeedReads(directory: String) -> Double {
        let path = "\(directory)/bench-scale-day.sqlite"
        SpoolBenchmark.remove(path)
        defer { SpoolBenchmark.remove(path) }
        guard fill(path, count: 1000) else { return .nan }
        return feedReads(path)
    }

    /// Deleting the oldest `purge` scans of a spool of `size` while a pipeline commits one scan every 10 ms, both
    /// ways it happens: the service's hourly retention (the same `Spool`, so the same connection and mutex as the
    /// pipeline) and `plings-bridge spool purge` in another process (the service waits for SQLite's write lock).
    /// For each: the longest of those commits, the purge's time; and the WAL's size afterwards.
    static func purgeStall(directory: String, size: Int, purge: Int) -> [BenchRow] {
        var rows: [BenchRow] = []
        for inProcess in [true, false] {
            let path = "\(directory)/bench-scale-purge.sqlite"
            SpoolBenchmark.remove(path)
            defer { SpoolBenchmark.remove(path) }
            guard fill(path, count: size), let service = try? Spool(path: path) else { return [] }
            let idle = commitLatency(path, samples: 100)
            // The fill spaced scans 30 s apart, newest now: the cutoff that leaves `size - purge` of them.
            let age = Double(size - purge) * 30 + 15
            let stop = Monitor(false)
            let latencies = Mutex<[Double]>([])
            let scans = SpoolBenchmark.makeScans(20_000)
            let writer = Thread {
                var n = 0
                while !stop.withLock({ $0 }), n < scans.count {
                    let start = MonotonicClock.now()
                    try? service.insert([scans[n]])
                    let took = (MonotonicClock.now() - start) * 1000
                    latencies.withLock { $0.append(took) }
                    n += 1
                    stop.wait(until: MonotonicClock.deadline(after: 0.01)) { $0 }
                }
            }
            writer.start()
            let start = MonotonicClock.now()
            var purged = 0
            if inProcess {
                purged = (try? service.purgeDelivered(before: Date().addingTimeInterval(-age))) ?? 0
            } else {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: Products.path("plings-bridge"))
                process.arguments = [
                    "spool", "purge", "--delivered", "--older-than", String(Int(age)), "--spool", path,
                ]
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                guard (try? process.run()) != nil else { return [] }
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                purged = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
            }
            let seconds = MonotonicClock.now() - start
            stop.update { $0 = true }
            var info = stat()
            let wal = stat(path + "-wal", &info) == 0 ? Double(info.st_size) / 1_048_576 : 0
            let how = inProcess ? "retention in the service" : "`spool purge` in another process"
            let sorted = latencies.withLock { $0 }.sorted()
            let p99 = sorted.isEmpty ? .nan : sorted[sorted.count * 99 / 100]
            rows += [
                BenchRow(
                    metric:
                        "\(how), \(purged.formatted()) of \(size.formatted()) scans: p99 of \(sorted.count) commits",
                    ours: p99, baseline: idle, unit: "ms", goal: "< 100 ms", higherIsBetter: false),
                BenchRow(
                    metric: "\(how): the longest commit meanwhile", ours: sorted.last ?? .nan, baseline: idle,
                    unit: "ms", goal: "< 100 ms", higherIsBetter: false),
                BenchRow(
                    metric:
                        "\(how): purge time (batches of \(Spool.purgeBatch)); WAL afterwards \(String(format: "%.1f", wal)) MB",
                    ours: seconds, baseline: nil, unit: "s", goal: "info"),
            ]
        }
        return rows
    }
}
