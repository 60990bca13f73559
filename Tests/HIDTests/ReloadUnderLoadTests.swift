import BridgeCore
import BridgeTestSupport
import Foundation
import Spool
import Testing

/// `run` with a scanner typing a stream of codes: SIGHUP twice and then SIGTERM while lines keep arriving.
/// Every acknowledged read must be in the spool, and no line before the stop may be missing.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/umockdev-run")))
struct ReloadUnderLoadTests {
    let binary = Products.path("plings-bridge")

    /// An evemu file in `dir` in which the scanner types `lines` one after the other (Enter after each, 1 ms per
    /// key down and up, 5 ms between codes), the first key `start` microseconds after load.
    func stream(_ lines: [String], in dir: TemporaryDirectory, start first: Int64) -> String {
        var events: [InputEvent] = []
        var start = first
        for line in lines {
            let typed =
                EventScript.typing(
                    line, layout: .us, suffix: .enter,
                    timing: EventScript.Timing(start: start, keyHold: 1000, keyGap: 1000))
                ?? []
            events += typed
            start = (typed.last.map { $0.seconds * 1_000_000 + $0.microseconds } ?? start) + 5000
        }
        let file = dir.file("stream.events")
        _ = FileManager.default.createFile(atPath: file, contents: Data(EventScript.evemuText(events).utf8))
        return file
    }

    @Test func readsDuringSIGHUPAndSIGTERMAreNotLost() throws {
        let dir = TemporaryDirectory("reload")
        defer { dir.remove() }
        // 80 codes, 2 ms per key, starting 2 s after load (the bridge is up by then): about 6 s of typing.
        let eventsFile = stream((0..<80).map { "https://s.plings.io/?t=q&i=R&p=1.\($0)" }, in: dir, start: 2_000_000)
        let config = dir.file("config.json")
        try #"{"nfc": {"enabled": false}, "location": {"enabled": false}, "hid": {"debounce": 0}}"#
            .write(toFile: config, atomically: true, encoding: .utf8)
        let spool = dir.file("s.sqlite")
        let env = Products.isolatedEnvironment(home: dir.path)
        let bridge = try RunningProcess(
            "/usr/bin/umockdev-run",
            [
                "-d", Products.rig("hid/zebra-event3.umockdev"), "-e", "/dev/input/event3=\(eventsFile)", "--", binary,
                "run", "--config", config, "--spool", spool,
            ],
            environment: env)
        defer { bridge.stop() }

        /// Waits (bounded) for `n` acknowledged reads in the process's log.
        func waitForAccepted(_ n: Int) -> Bool {
            bridge.waitForLog(timeout: 20) { $0.components(separatedBy: "msg=\"scan accepted\"").count - 1 >= n }
        }

        #expect(waitForAccepted(10), "\(bridge.stderrText.suffix(2000))")
        bridge.signalChildren(SIGHUP)
        #expect(waitForAccepted(30))
        // A reload with a changed file (another debounce for NFC, which is off): sources stay up.
        try #"{"nfc": {"enabled": false, "debounce": 3}, "location": {"enabled": false}, "hid": {"debounce": 0}}"#
            .write(toFile: config, atomically: true, encoding: .utf8)
        bridge.signalChildren(SIGHUP)
        #expect(waitForAccepted(50))
        bridge.signalChildren(SIGTERM)
        // Under ThreadSanitizer (scripts/tsan) the instrumented bridge under umockdev-run's preload logs "stopped"
        // but its process exit was seen to take more than 30 s on a loaded machine (without umockdev it takes 1 s,
        // TSan's atexit pause): there the run checks races and the spool below, the normal run the exit.
        let exit = bridge.waitForExit(timeout: 6 * Products.timeScale)
        if Products.timeScale == 1 { #expect(exit == 0, "\(bridge.stderrText.suffix(1500))") }

        let log = bridge.stderrText
        #expect(log.components(separatedBy: "configuration reloaded").count - 1 == 2)
        let acknowledged = Set(
            log.split(separator: "\n").filter { $0.contains("msg=\"scan accepted\"") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("id=") }.map { String($0.dropFirst(3)) }
            })
        let records = try Spool(path: spool).list()
        #expect(acknowledged.isSubset(of: Set(records.map(\.id))))
        #expect(records.count >= 50)
        // No gap: the codes in the spool are exactly the first k typed, in order.
        let paths = records.compactMap { $0.raw.split(separator: "=").last.map(String.init) }
        #expect(paths == (0..<records.count).map { "1.\($0)" })
        // No sink is configured: every read is kept, the spool its destination (docs/contracts.md, "Spool record").
        #expect(records.allSatisfy { $0.state == .kept && $0.sourceKind == .hid })
    }

    /// Issue 44: a scanner renamed by a reload while it types. Reads before the reload keep the name they were read
    /// under, reads after carry the new one, and none is lost on the way (the source restarts with its new rule).
    @Test func aRenameByReloadNamesTheReadsAfterIt() throws {
        let dir = TemporaryDirectory("rename")
        defer { dir.remove() }
        let eventsFile = stream((0..<60).map { "https://s.plings.io/?t=q&i=R&p=2.\($0)" }, in: dir, start: 2_000_000)
        let config = dir.file("config.json")
        func name(_ name: String) throws {
            try
                #"{"nfc": {"enabled": false}, "location": {"enabled": false}, "hid": {"debounce": 0, "match": [{"serial": "DS2208", "name": "\#(name)"}]}}"#
                .write(toFile: config, atomically: true, encoding: .utf8)
        }
        try name("bench-2-left")
        let spool = dir.file("s.sqlite")
        let bridge = try RunningProcess(
            "/usr/bin/umockdev-run",
            [
                "-d", Products.rig("hid/zebra-event3.umockdev"), "-e", "/dev/input/event3=\(eventsFile)", "--", binary,
                "run", "--config", config, "--spool", spool,
            ],
            environment: Products.isolatedEnvironment(home: dir.path))
        defer { bridge.stop() }
        func waitForAccepted(_ n: Int) -> Bool {
            bridge.waitForLog(timeout: 20) { $0.components(separatedBy: "msg=\"scan accepted\"").count - 1 >= n }
        }
        #expect(waitForAccepted(10), "\(bridge.stderrText.suffix(2000))")
        try name("bench-2-right")
        bridge.signalChildren(SIGHUP)
        #expect(bridge.waitForLog(timeout: 20) { $0.contains("configuration reloaded") })
        #expect(waitForAccepted(40), "\(bridge.stderrText.suffix(2000))")
        bridge.signalChildren(SIGTERM)
        _ = bridge.waitForExit(timeout: 6 * Products.timeScale)

        let records = try Spool(path: spool).list()
        let devices = records.map(\.device)
        let left = devices.prefix { $0 == "bench-2-left" }.count
        #expect(left >= 10, "\(devices)")
        #expect(devices.dropFirst(left).allSatisfy { $0 == "bench-2-right" }, "\(devices)")
        #expect(devices.count - left >= 1, "\(devices)")
        // No gap across the restart of the source: the codes are exactly the first k typed, in order.
        let paths = records.compactMap { $0.raw.split(separator: "=").last.map(String.init) }
        #expect(paths == (0..<records.count).map { "2.\($0)" })
    }

    /// Issue 40, item 1: `hid.passThrough` where `/dev/uinput` is absent (this host, umockdev's /dev): the service
    /// says so in one plain line with the fix and reads every code as before; `doctor` fails its pass-through line.
    @Test func passThroughWithoutUinputSaysSoAndLosesNoRead() throws {
        let dir = TemporaryDirectory("pass-through")
        defer { dir.remove() }
        let eventsFile = stream(
            ["https://s.plings.io/?t=q&i=R&p=3.0", "LABEL-1", "https://s.plings.io/?t=q&i=R&p=3.2"], in: dir,
            start: 1_500_000)
        let config = dir.file("config.json")
        try #"{"nfc": {"enabled": false}, "location": {"enabled": false}, "hid": {"passThrough": "all"}}"#
            .write(toFile: config, atomically: true, encoding: .utf8)
        let spool = dir.file("s.sqlite")
        let rig = ["-d", Products.rig("hid/zebra-event3.umockdev"), "-e", "/dev/input/event3=\(eventsFile)"]
        let env = Products.isolatedEnvironment(home: dir.path)
        let bridge = try RunningProcess(
            "/usr/bin/umockdev-run", rig + ["--", binary, "run", "--config", config, "--spool", spool],
            environment: env)
        defer { bridge.stop() }
        #expect(
            bridge.waitForLog(timeout: 20) {
                $0.components(separatedBy: "msg=\"scan accepted\"").count
                    + $0.components(separatedBy: "msg=\"read unrecognized\"").count - 2 >= 3
            }, "\(bridge.stderrText.suffix(2000))")
        bridge.signalChildren(SIGTERM)
        _ = bridge.waitForExit(timeout: 6 * Products.timeScale)
        let lines = bridge.stderrText.split(separator: "\n").filter { $0.contains("hid.passThrough is on") }
        #expect(lines.count == 1, "\(bridge.stderrText.suffix(2000))")
        #expect(lines.first?.contains("modprobe uinput") == true, "\(lines)")
        let records = try Spool(path: spool).list()
        #expect(
            records.map(\.raw) == [
                "https://s.plings.io/?t=q&i=R&p=3.0", "LABEL-1", "https://s.plings.io/?t=q&i=R&p=3.2",
            ])

        let doctor = try ProcessRunner.run(
            "/usr/bin/umockdev-run", rig + ["--", binary, "doctor", "--config", config, "--spool", spool],
            environment: env, timeout: 60)
        #expect(
            doctor.stdout.contains(
                "[fail] pass-through: hid.passThrough is all but /dev/uinput is missing: codes go to plings-bridge only"
            ),
            "\(doctor.stdout)")
    }
}
