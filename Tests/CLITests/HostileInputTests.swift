import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// Security review findings 1, 9 and 10 against the real `plings-bridge` executable (docs/reliability.md,
/// "Security review").
@Suite(.serialized)
struct HostileInputTests {
    let binary = Products.path("plings-bridge")

    func environment(_ dir: TemporaryDirectory, _ extra: [String: String] = [:]) -> [String: String] {
        Products.isolatedEnvironment(home: dir.path).merging(extra) { $1 }
    }

    func run(_ args: [String], _ dir: TemporaryDirectory, env: [String: String] = [:], timeout: Double = 30) throws
        -> ProcessResult
    {
        try ProcessRunner.run(binary, args, environment: environment(dir, env), timeout: timeout)
    }

    func write(_ text: String, _ path: String, mode: Int = 0o600) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    // MARK: finding 1

    /// A read carrying a newline, ESC sequences (colour, window title), BEL, a C1 CSI and a backslash: `spool list`
    /// shows each as a visible escape (byte for byte), `--json` keeps the read exact.
    @Test func spoolListShowsControlCharactersEscaped() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = dir.file("s.sqlite")
        let raw = "x\nlevel=error msg=\"forged\"\u{1B}[31m\u{1B}]0;title\u{07}\u{9B}2J\\"
        let scan = try run(["scan", raw, "--spool", spool, "--no-location"], dir)
        #expect(scan.status == 0, "\(scan.stderr)")
        let json = try run(["spool", "list", "--json", "--spool", spool], dir)
        let record = try JSONParser.parse(json.stdout.trimmingASCIIWhitespace())
        #expect(record["raw"] == .string(raw))
        // The JSON text itself carries no raw control byte (C1 included) either.
        #expect(!json.stdout.utf8.contains { $0 < 0x0A || (0x0B..<0x20).contains($0) || $0 == 0x7F })
        #expect(!json.stdout.unicodeScalars.contains { (0x80...0x9F).contains($0.value) })
        let created = try #require(record["createdAt"]?.stringValue)
        let id = try #require(record["id"]?.stringValue)
        let list = try run(["spool", "list", "--spool", spool], dir)
        let expected =
            created + "  unrecognized  manual:cli  " + #"x\nlevel=error msg="forged"\x1b[31m\x1b]0;title\x07\x9b2J\\"#
            + "  -  [not a URL]  id=" + id + "\n"
        #expect(Array(list.stdout.utf8) == Array(expected.utf8))
    }

    /// `doctor` and `status` show outside text (a config key, a status file's error) escaped too.
    @Test func doctorAndStatusShowControlCharactersEscaped() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let config = dir.file("c.json")
        try write(#"{"a\u001b]0;pwned\u0007\n": 1}"#, config)
        let doctor = try run(["doctor", "--config", config, "--no-nfc", "--no-hid", "--no-location"], dir)
        let firstLine = try #require(doctor.stdout.split(separator: "\n", omittingEmptySubsequences: false).first)
        let expected =
            "[fail] config: unknown config key 'a" + #"\x1b]0;pwned\x07\n"# + "' in \(config)"
            + "; docs/configuration.md lists every key"
        #expect(Array(firstLine.utf8) == Array(expected.utf8))

        let spool = dir.file("st.sqlite")
        try write(
            #"{"pid": \#(getpid()), "version": "1\u001b[2J", "startedAt": "2026-06-14T08:00:00.000Z", "#
                + #""lastError": "boom\nlevel=error msg=forged\u001b]0;t\u0007\u009b"}"#, dir.file("status.json"))
        let status = try run(["status", "--spool", spool], dir)
        #expect(status.status == 0)
        let lines =
            #"plings-bridge 1\x1b[2J running, pid \#(getpid()), since 2026-06-14T08:00:00.000Z"# + "\n"
            + "no sink delivers scans: they are kept in the spool\n"
            + #"last error: boom\nlevel=error msg=forged\x1b]0;t\x07\x9b"# + "\n"
        #expect(Array(status.stdout.utf8) == Array(lines.utf8))
    }

    // MARK: finding 9

    /// A pid that is not a process (too large for pid_t, 0, negative) means "not running", never a trap and never
    /// "running" because kill(0) or kill(-1) reached our own process group.
    @Test func statusFileWithImpossiblePidIsNotRunning() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = dir.file("p.sqlite")
        for pid in ["99999999999", "0", "-1", "1e300"] {
            try write(#"{"pid": \#(pid), "version": "x"}"#, dir.file("status.json"))
            let status = try run(["status", "--spool", spool], dir)
            #expect(status.status == 1, "pid \(pid): exit \(status.status)")
            #expect(status.stdout.hasPrefix("plings-bridge is not running"), "pid \(pid): \(status.stdout)")
        }
    }

    /// Ages and waits from flags are checked: non-finite or unrepresentable values are a usage error (exit 2)
    /// naming the flag, not a trap (signal 4, exit 132) or a wait that never ends.
    @Test func hugeAndInfiniteNumbersFromFlagsAreRefused() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = dir.file("n.sqlite")
        _ = try run(["scan", "https://s.plings.io/?t=q&i=A&p=1", "--spool", spool, "--no-location"], dir)
        for age in ["inf", "1e300", "1e12d", "nan", "-1"] {
            let purge = try run(["spool", "purge", "--delivered", "--older-than", age, "--spool", spool], dir)
            #expect(purge.status == 2, "--older-than \(age): exit \(purge.status)")
            #expect(purge.stderr.contains("--older-than"), "\(purge.stderr)")
        }
        let fine = try run(["spool", "purge", "--delivered", "--older-than", "36500d", "--spool", spool], dir)
        #expect(fine.status == 0 && fine.stdout == "purged 0 delivered scan(s)\n")
        let testRead = try run(["test-read", "--timeout", "1e300"], dir)
        #expect(testRead.status == 2 && testRead.stderr.contains("--timeout"))
        let watch = try run(["scanners", "--watch", "--duration", "inf"], dir, timeout: 15)
        #expect(watch.status == 2 && watch.stderr.contains("--duration"))
    }

    /// `WATCHDOG_USEC` from the environment is an unsigned count of microseconds (sd_watchdog_enabled(3));
    /// `inf` is no watchdog request, not a trap at the first ping.
    @Test func infiniteWatchdogFromTheEnvironmentIsIgnored() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let bridge = try RunningProcess(
            binary, ["run", "--spool", dir.file("w.sqlite"), "--no-nfc", "--no-hid", "--no-location"],
            environment: environment(dir, ["WATCHDOG_USEC": "inf"]))
        defer { bridge.stop() }
        #expect(eventually(timeout: 20) { bridge.stderrText.contains("msg=\"ready:") })
        #expect(bridge.waitForExit(timeout: 1) == nil, "exited: \(bridge.stderrText)")
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)
    }

    // MARK: finding 10

    /// Config and token files over 1 MiB are refused by their size before they are read: a sparse 10 GiB file
    /// would take 10 GiB of memory to read.
    @Test func oversizedConfigAndTokenFilesAreRefusedBeforeReading() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let big = dir.file("big.json")
        _ = FileManager.default.createFile(atPath: big, contents: nil)
        #expect(truncate(big, 10 << 30) == 0)
        let result = try run(["scan", "x", "--dry-run", "--config", big], dir)
        #expect(result.status == 2)
        #expect(result.stderr.contains("config file \(big) is 10737418240 bytes"), "\(result.stderr)")
        #expect(result.stderr.contains("limited to 1 MiB"))

        let token = dir.file("token")
        try write(String(repeating: "t", count: (1 << 20) + 1), token)
        let tokenResult = try run(
            ["scan", "x", "--dry-run", "--api-url", "https://api.example/graphql", "--api-token-file", token], dir)
        #expect(tokenResult.status == 2)
        #expect(tokenResult.stderr.contains("token file \(token) is 1048577 bytes"), "\(tokenResult.stderr)")
    }

    /// A token file others can read: one warning at start and one per reload, and a doctor finding with the fix.
    @Test func readableTokenFileIsWarnedAbout() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let token = dir.file("token")
        try write("0123456789abcdef-token\n", token, mode: 0o644)
        let config = dir.file("c.json")
        try write(
            #"{"api": {"url": "http://127.0.0.1:9/graphql", "tokenFile": "\#(token)", "allowInsecureHTTP": true}}"#,
            config)
        let doctor = try run(["doctor", "--config", config, "--no-nfc", "--no-hid", "--no-location"], dir)
        #expect(
            doctor.stdout.contains(
                "[warn] token: token file \(token) can be read by every user (mode 644)\n"
                    + "       fix: chmod 600 \(token)"), "\(doctor.stdout)")

        let bridge = try RunningProcess(
            binary,
            ["run", "--config", config, "--spool", dir.file("r.sqlite"), "--no-nfc", "--no-hid", "--no-location"],
            environment: environment(dir))
        defer { bridge.stop() }
        #expect(eventually(timeout: 20) { bridge.stderrText.contains("msg=\"ready:") })
        let warning = "can be read by every user"
        #expect(bridge.stderrText.components(separatedBy: warning).count - 1 == 1, "\(bridge.stderrText)")
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: token)
        bridge.signal(SIGHUP)
        #expect(eventually(timeout: 10) { bridge.stderrText.contains("configuration reloaded") })
        #expect(bridge.stderrText.contains("token file \(token) can be read by its group (mode 640)"))
        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 5) == 0)

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: token)
        let quiet = try run(["doctor", "--config", config, "--no-nfc", "--no-hid", "--no-location"], dir)
        #expect(!quiet.stdout.contains("token:"), "\(quiet.stdout)")
    }

    /// An empty token file means "no token yet": fine without an API, a config error naming the file with one.
    @Test func emptyTokenFileMeansNoTokenYet() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let token = dir.file("empty-token")
        try write("\n", token)
        let local = try run(
            [
                "scan", "https://s.plings.io/?t=q&i=A&p=1", "--spool", dir.file("e.sqlite"), "--no-location",
                "--api-token-file", token,
            ], dir)
        #expect(local.status == 0, "\(local.stderr)")
        let api = try run(
            ["scan", "x", "--dry-run", "--api-url", "https://api.example/graphql", "--api-token-file", token], dir)
        #expect(api.status == 2)
        #expect(api.stderr.contains("the token file \(token) (api.tokenFile) is empty"), "\(api.stderr)")
    }
}
