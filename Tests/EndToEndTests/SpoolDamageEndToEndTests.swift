import BridgeCore
import BridgeTestSupport
import Foundation
import Platform
import Spool
import Testing

/// A damaged spool under the real processes (issue 43): `scan` still takes the read (exit 0) and says what happened
/// in one line; `run` finds damage no statement met with its start-up check, moves the file aside, salvages it, and
/// `status`, the metrics and `doctor` say so, as docs/operations.md ("A damaged spool") describes.
@Suite(.serialized)
struct SpoolDamageEndToEndTests {
    let binary = Products.path("plings-bridge")

    struct Setup {
        let dir = TemporaryDirectory("spool-damage")
        let config: String
        var spoolPath: String { dir.file("spool.sqlite") }
        var environment: [String: String] { Products.isolatedEnvironment(home: dir.path, listensHTTP: true) }

        init(port: Int) throws {
            config = dir.file("config.json")
            try """
            {"http": {"listen": "127.0.0.1:\(port)"}, "nfc": {"enabled": false}, "hid": {"enabled": false},
             "hidpos": {"enabled": false}, "serial": {"enabled": false}, "location": {"enabled": false}}
            """.write(toFile: config, atomically: true, encoding: .utf8)
        }

        /// 300 scans (every seventh unrecognized), checkpointed into the main file, then random bytes over every
        /// third page past the schema's, as a worn card leaves them.
        func damagedSpool() throws {
            do {
                let spool = try Spool(path: spoolPath, synchronous: .off)
                let builder = ScanBuilder(parser: PlingsURLParser())
                for n in 1...300 {
                    let raw = n % 7 == 0 ? "not a url \(n)" : "https://s.plings.io/?t=q&i=Gate\(n)x&p=4.2.\(n)"
                    try spool.insert([
                        builder.build(Read(sourceKind: .manual, device: "gate", raw: raw, time: Date()), fix: nil)
                    ])
                }
            }
            let checkpoint = try ProcessRunner.run(
                "/usr/bin/python3",
                [
                    "-c", "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')",
                    spoolPath,
                ])
            #expect(checkpoint.status == 0, "\(checkpoint.stderr)")
            let handle = try #require(FileHandle(forUpdatingAtPath: spoolPath))
            defer { try? handle.close() }
            let pages = Int(try handle.seekToEnd()) / 4096
            var generator = SeededRandom(seed: 43)
            for page in stride(from: 20, to: pages, by: 3) {
                try handle.seek(toOffset: UInt64(page * 4096 + 200))
                handle.write(Data(generator.bytes(3000)))
            }
        }

        func damagedFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter {
                $0.hasPrefix("spool.sqlite.damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
                    && !$0.hasSuffix(".salvaged")
            }
        }
    }

    func run(_ s: Setup, _ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run(
            binary, arguments + ["--config", s.config, "--spool", s.spoolPath], environment: s.environment,
            timeout: 60)
    }

    @Test func scanStillTakesTheReadAndSaysWhatHappened() throws {
        let s = try Setup(port: try ListeningSocket.freePort())
        defer { s.dir.remove() }
        try s.damagedSpool()
        // What a worn card did before: `spool list` failed, `doctor` said nothing of damage.
        #expect(try run(s, ["doctor"]).stdout.contains("is damaged"))
        let scanned = try run(s, ["scan", "https://s.plings.io/?t=q&i=After1x&p=4.2.9", "--device", "gate"])
        #expect(scanned.status == 0, "\(scanned.stderr)")
        let lines = scanned.stderr.split(separator: "\n").filter { $0.contains("spool damaged") }
        #expect(lines.count == 1 && lines[0].contains("movedTo="), "\(scanned.stderr)")
        #expect(scanned.stderr.contains("spool salvaged"), "\(scanned.stderr)")
        #expect(s.damagedFiles().count == 1)
        let list = try run(s, ["spool", "list", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        let raws = try list.stdoutLines.map { try JSONParser.parse($0)["raw"]?.stringValue ?? "" }
        #expect(raws.last == "https://s.plings.io/?t=q&i=After1x&p=4.2.9", "the read is the newest")
        #expect(raws.count > 150, "readable scans were salvaged: \(raws.count) \(scanned.stderr)")
        // `doctor` no longer fails, and warns of the file beside the spool.
        let doctor = try run(s, ["doctor"])
        #expect(
            doctor.stdout.contains("[warn] spool:") && doctor.stdout.contains("damaged file(s)"), "\(doctor.stdout)")
    }

    @Test func theServiceFindsDamageAtStartAndStatusMetricsSaySo() throws {
        let port = try ListeningSocket.freePort()
        let s = try Setup(port: port)
        defer { s.dir.remove() }
        try s.damagedSpool()
        let bridge = try RunningProcess(
            binary, ["run", "--config", s.config, "--spool", s.spoolPath], environment: s.environment)
        defer { bridge.stop() }
        #expect(
            bridge.waitForLogLine(timeout: 20 * Products.timeScale) { $0.contains("spool salvaged") } != nil,
            "\(bridge.stderrText)")
        #expect(bridge.stderrText.contains("spool damaged: moved aside"))
        #expect(s.damagedFiles().count == 1)
        let metrics = try ProcessRunner.run("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/metrics"])
        #expect(metrics.stdout.contains("plings_bridge_spool_damaged 1"), "\(metrics.stdout)")
        let status = try ProcessRunner.run("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/status"])
        let damaged = try JSONParser.parse(Array(status.stdout.utf8))["spool"]?["damaged"]
        guard case .array(let files)? = damaged, let first = files.first else {
            Issue.record("no spool.damaged in status: \(status.stdout)")
            return
        }
        #expect(first["salvaged"]?["recovered"] != nil && first["salvaged"]?["recovered"] != .integer(0))
        // Reads go on into the fresh spool while the service runs.
        let scanned = try run(s, ["scan", "https://s.plings.io/?t=q&i=After2x&p=4.2.9", "--device", "gate"])
        #expect(scanned.status == 0, "\(scanned.stderr)")
        #expect(bridge.process.isRunning)
    }
}
