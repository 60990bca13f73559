import Bridge
import SinkKit
import SourceKit

/// Every command of `plings-bridge`, each described once (`Command`): `--help`, the command list, the parser and
/// dispatch all read this table. docs/contracts.md, "Command line", is the contract it implements.
extension CLI {
    static let commands: [Command] = [
        Command(
            "run", summary: "the service: sources, pipeline, spool, sinks (until SIGTERM/SIGINT)",
            about: """
                Runs the service until SIGTERM or SIGINT (graceful: commits the read in hand, stops within 5 s).
                SIGHUP reloads the configuration. Every configured sink (api, mqtt, webhook) is sent every scan; with
                none, scans are kept in the local spool.
                """,
            sources: Option.source, handler: .parsed { try $0.run($1) }),
        Command(
            "scan", synopsis: "scan TEXT", summary: "one read through the pipeline; prints the spool record as JSON",
            usage: ["scan TEXT [--source \(CLI.sourceKinds.joined(separator: "|"))] [--dry-run] [options]"],
            about: """
                Sends TEXT (a Plings URL, or anything a scanner could type) through the same pipeline as a real read:
                location fix, input, spool, and one delivery attempt when an API is configured. Prints the spool
                record as JSON. Exit 0 when the read was accepted into the spool (unrecognized reads included).
                """,
            options: [
                Option(
                    "--source", value: "KIND",
                    "the source to record: \(CLI.sourceKinds.joined(separator: ", ")) (default manual)"),
                Option("--device", value: "NAME", "the device name to record (default cli)"),
                Option("--dry-run", "print the exact HTTP request body; spool nothing"),
            ],
            sources: Option.source, handler: .parsed { try $0.scan($1) }),
        Command(
            "spool", synopsis: "spool " + SpoolSubcommand.names, summary: "inspect and manage the local spool",
            usage: ["spool <subcommand> [options]"],
            about: """
                  list [--state S] [--sink NAME] [--last N] [--since AGE] [--newest-first] [--json]
                                           scans in capture order (JSON: one object per line)
                  stats [--json]           counts per state, oldest pending age, last delivery error, each sink
                  retry ID | --dead [--sink NAME]
                                           revive a dead scan (or all of them) for every sink, or for one
                  retry --kept [--sink NAME]
                                           send the scans kept while no sink was configured (every enabled
                                           sink, or the one named)
                  export                   every scan as JSON lines (for backup or hand-over)
                  purge --delivered --older-than AGE
                                           delete scans every sink finished (took or refused) longer than AGE
                                           ago (e.g. 7d, 12h, 3600)
                  salvage FILE [--json]    copy every scan still readable in a damaged spool file (moved aside
                                           as spool.sqlite.damaged-TIME) into the spool, delivery states kept
                Pending, kept and unrecognized scans are never purged.
                """,
            options: [
                Option(
                    "--state", value: "S", "only scans in state S (pending, delivered, dead, unrecognized, kept)",
                    for: ["list"]),
                Option("--limit", value: "N", "the oldest N scans", for: ["list"]),
                Option("--last", value: "N", "the newest N scans", for: ["list"]),
                Option("--since", value: "AGE", "scans captured in the last AGE (7d, 12h, 30m, 45s)", for: ["list"]),
                Option("--newest-first", "newest scan first", for: ["list"]),
                Option("--dead", "every dead scan", for: ["retry"]),
                Option("--kept", "every kept scan (read while no sink was configured)", for: ["retry"]),
                Option(
                    "--sink", value: "NAME",
                    "only this sink's scans (api, mqtt, webhook); --state is then the sink's own",
                    for: ["list", "retry"]),
                Option("--delivered", "delivered scans (required: nothing else is purged)", for: ["purge"]),
                Option(
                    "--older-than", value: "AGE", "scans older than AGE (7d, 12h, 30m, 45s, 1w or seconds)",
                    for: ["purge"]),
            ],
            handler: .parsed { try $0.spool($1) }),
        Command(
            "status", summary: "the running service: sources, last reads, spool, delivery",
            about: """
                The running service's snapshot: sources, last read per device, spool counts, delivery state and the
                last error. Exit 1 when the service is not running.
                """,
            handler: .parsed { try $0.status($1) }),
        Command(
            "doctor", summary: "checks pcscd, readers, udev rules, scanners, gpsd, clock, spool, API",
            about: """
                Checks everything a gate needs, one line each with the fix: configuration, spool (writable, free disk,
                schema), API (reachable, token accepted), readers and pcscd, scanners, gpsd, udev and polkit rules,
                clock. Runs without hardware and says so. Exit 0 when nothing failed, 1 otherwise.
                JSON: an array of {"name", "status", "message", "fix"}.
                """,
            sources: Option.source, handler: .parsed { try $0.doctor($1) }),
        Command(
            "gps", summary: "gpsd status: connected, mode, position, accuracy, fix age, satellites",
            usage: ["gps [--json] [--gpsd HOST:PORT] [options]"],
            about: """
                Asks gpsd (location.gpsd, default 127.0.0.1:2947) for its status, waiting up to 2 s for a report:
                connected or not, fix mode, position, accuracy (metres), fix age, satellites used/visible, and the
                system clock's offset from GPS time. gpsd not running is reported (connected false), exit 0.
                JSON: {"connected", "mode", "latitude", "longitude", "accuracy", "fixAge", "satellitesUsed",
                "satellitesVisible", "clockOffset", ...}; null when unknown.
                """,
            options: [Option("--gpsd", value: "HOST:PORT", "the gpsd to ask", sets: .key("location.gpsd"))],
            handler: .parsed { try $0.gps($1) }),
        Command(
            "scanners", synopsis: "scanners [--json]",
            summary: "barcode scanners (keyboard, HID POS, serial): match reason, open check; --watch",
            usage: [
                "scanners [--json] [options]",
                "scanners --watch [--count N] [--duration SECONDS] [--pipeline] [options]",
                "scanners --calibrate [--device /dev/input/eventN] [--layouts LIST] [--timeout SECONDS] [--json]",
                "scanners --calibration-sheet FILE.svg|FILE.png",
                "scanners --test [--count N] [--expect TEXT] [--report FILE.html] [--junit FILE.xml] [--max-p95 MS]",
            ],
            about: """
                Lists what each read source could read: every keyboard udev knows (a scanner by the udev rule's
                PLINGS_SCANNER=1 or a hid.match rule, and whether it can be opened and grabbed now: a scanner held by
                a running plings-bridge says "grabbed by another process"), every hidraw node (a HID POS scanner
                when its report descriptor has a Bar Code Scanner collection, else the usage pages it has) and
                every USB serial port (and the serial.match rule that names it). Opens nothing a service may hold.
                JSON: an array of {"transport", "devnode", "name", "vendor", "model", "serial", "path", "matched",
                "reason", "openable", "grabbable", "stableName", "layout", "problem"}; empty when there is nothing.
                """,
            options: [
                Option(
                    "--watch",
                    """
                    read the scanners as `run` would (grab, layout, suffix) and print each
                    line as JSON {"device", "raw", "time"}; stops after --count lines or
                    --duration seconds, else runs until interrupted
                    """),
                Option(
                    "--calibrate",
                    """
                    wait for a keyboard-wedge scanner to read the calibration code and name the
                    xkb layout (hid.layout) whose keys explain exactly what it typed; JSON:
                    {"device", "layout", "candidates", "closest", "config"}; exit 1 when none does
                    """),
                Option("--device", value: "PATH", "with --calibrate: this evdev node instead of the matched scanners"),
                Option(
                    "--test",
                    """
                    bench acceptance: scan a code --count times (default 10), each compared with
                    --expect TEXT (default: any code of the calibration sheet), with the characters
                    it got wrong and its typing time; --report, --junit, --max-p95 and
                    --min-success as test-read has them
                    """),
                Option("--expect", value: "TEXT", "with --test: the text every scan must give"),
                Option("--report", value: "FILE", "with --test: write an HTML report"),
                Option("--junit", value: "FILE", "with --test: write JUnit XML (a test case per scan)"),
                Option("--max-p95", value: "MS", "with --test: pass only if the p95 typing time is at most MS"),
                Option("--min-success", value: "PCT", "with --test: pass only if at least PCT percent scan right"),
                Option(
                    "--calibration-sheet", value: "FILE",
                    "write the printable calibration sheet (the calibration code and three test codes) as SVG or PNG"),
                Option("--timeout", value: "SECONDS", "with --calibrate: how long to wait for the scan (default 60)"),
                Option(
                    "--layouts", value: "LIST",
                    "with --calibrate: only these layouts (de: with its variants; de(nodeadkeys): that one)"),
                Option("--count", value: "N", "with --watch: stop after N lines"),
                Option("--duration", value: "SECONDS", "with --watch: stop after this many seconds"),
                Option(
                    "--pipeline",
                    """
                    with --watch: also commit each line to the spool through the pipeline
                    (hid.debounce applies) and print its outcome
                    """),
            ],
            handler: .parsed { try $0.scanners($1) }),
        Command(
            "readers", summary: "PC/SC readers: card present, ATR, tag kind, UID",
            about: """
                Lists the PC/SC readers pcscd knows, the USB port each is plugged into and its serial (null when the
                driver gives no USB channel: the reader keeps its PC/SC name), the name its reads carry (nfc.names),
                whether a card is on each, its ATR, tag kind and UID, and whether nfc.readers selects the reader. No
                pcscd or no readers is an empty list (exit 0); the line says why. JSON: an array of {"name", "device",
                "path", "serial", "cardPresent", "atr", "tagKind", "tagName", "uid", "selected", "note"}.
                """,
            handler: .parsed { try $0.readers($1) }),
        Command(
            "test-read", summary: "read N taps and show UID, URL, APDUs and timings (for hardware testers)",
            usage: [
                "test-read [--reader NAME] [--count N] [--timeout S] [--json] [options]",
                "test-read --count N [--report FILE.html] [--junit FILE.xml] [--max-p95 MS] [--min-success PCT]",
            ],
            about: """
                Waits for N taps (default 1) and prints, per tap, the UID, tag kind, URL, APDU count, detect-to-read
                and read time, or the error; then a summary with the success rate and the median and p95
                detect-to-read time. Nothing is spooled. Exit 1 when a read failed or a tap did not come in time;
                with pass criteria (--max-p95, --min-success), exit 1 when they are not met.
                JSON: one object per tap, then {"summary": {...}}. --report writes a self-contained HTML report
                (setup, histogram, taps, verdict) to file, --junit JUnit XML (a test case per tap and one for the
                criteria) for a lab's CI.
                """,
            options: [
                Option(
                    "--reader", value: "NAME", "only this reader (a shell-style pattern; default nfc.readers, else all)"
                ),
                Option("--count", value: "N", "taps to wait for (default 1)"),
                Option("--timeout", value: "S", "seconds to wait for each tap (default 60)"),
                Option(
                    "--report", value: "FILE", "write an HTML report (one self-contained file, prints on 1-2 pages)"),
                Option("--junit", value: "FILE", "write JUnit XML: a test case per tap, one for the pass criteria"),
                Option("--max-p95", value: "MS", "pass only if the p95 detect-to-read time is at most MS"),
                Option("--min-success", value: "PCT", "pass only if at least PCT percent of the taps read"),
            ],
            handler: .parsed { try $0.testRead($1) }),
        Command(
            "config", synopsis: "config check", summary: "check the configuration as the service would load it",
            usage: ["config check [--config FILE] [options]"],
            about: """
                Loads the configuration exactly as `run` does (the file, PLINGS_BRIDGE_* variables, flags and the token
                file) and says whether the service would accept it. Exit 0 when it would, 2 with one line naming the
                key, the value and the fix when not. Run it before every `systemctl reload plings-bridge`.
                """,
            handler: .parsed { try $0.config($1) }),
        Command(
            "reload", summary: "reload the running service's configuration and wait for its answer",
            usage: ["reload [--pid PID] [--timeout S] [options]"],
            about: """
                The unit's ExecReload=. Checks the configuration first: a refused one exits 2 and the service is left
                alone. Then sends SIGHUP and waits for the service to apply the new configuration (exit 0) or refuse
                it (exit 1, with the reason; it keeps running on the previous one).
                """,
            options: [
                Option("--pid", value: "PID", "the service's process (default: the pid in its status file)"),
                Option("--timeout", value: "S", "seconds to wait for the service's answer (default 10)"),
            ],
            handler: .parsed { try $0.reload($1) }),
        Command(
            "version", summary: "version and linked library versions",
            about: "Prints the version and the versions of the linked libraries.",
            handler: .parsed { try $0.version($1) }),
        Command(
            "manpage", summary: "print the manual page (roff), made from this command table",
            about: "Prints plings-bridge(1) in roff; the package installs it (man plings-bridge).",
            handler: .parsed { try $0.manpage($1) }),
        Command(
            "completion", synopsis: "completion bash", summary: "print the bash completion script",
            usage: ["completion bash"],
            about: "Prints a bash completion script for every command and flag; the package installs it.",
            handler: .parsed { try $0.completion($1) }),
        Command(
            "help", synopsis: "help [COMMAND]", summary: "this text, or a command's", usage: ["help [COMMAND]"],
            handler: .raw { cli, words in cli.help(words.first) }),
    ]

    /// The command named `name`; `--help` and `-h` in its place are `help`, `--version` is `version`.
    static func command(named name: String) -> Command? {
        let aliases = ["--help": "help", "-h": "help", "--version": "version"]
        let name = aliases[name] ?? name
        return commands.first { $0.name == name }
    }

    /// `plings-bridge --help`: the command list and the options every command takes, from the table.
    static var mainHelp: String {
        var lines = [
            "plings-bridge: reads Plings NFC tags and QR codes from fixed hardware and reports them to the Plings API.",
            "", "Usage: plings-bridge <command> [options]", "", "Commands:",
        ]
        lines += commands.flatMap { Command.row($0.synopsis, $0.summary) }
        lines += ["", "Options every command takes:"] + Command.describe(Option.common)
        lines += ["", "Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error."]
        return lines.joined(separator: "\n")
    }

    /// `help [COMMAND]`: a command's help, or the main help for no or an unknown command. Exit 0.
    func help(_ name: String?) -> Int32 {
        print(CLI.commands.first { $0.name == name }?.help ?? CLI.mainHelp)
        return 0
    }
}

extension Option {
    /// The options every command takes.
    static let common = [
        Option("--config", value: "PATH", "JSON config (default /etc/plings-bridge/config.json when present)"),
        Option(
            "--spool", value: "PATH", "the spool database (default under $STATE_DIRECTORY or ~/.local/state)",
            sets: .key("spool.path")),
        Option("--json", "machine-readable output (where the command has one)"),
        Option("--log-level", value: "LEVEL", "debug, info, warn or error (default info)"),
        Option("--help", short: "-h", "help"),
    ]

    /// The flags of the commands that run sources (`run`, `scan`, `doctor`), each setting its config key.
    static let source =
        [
            Option(
                "--api-url", value: "URL",
                "deliver to this GraphQL endpoint (https://; http:// to loopback with\napi.allowInsecureHTTP)",
                sets: .key("api.url")),
            Option(
                "--api-token-file", value: "PATH",
                "bearer token file (never pass the token itself on the command line)",
                sets: .key("api.tokenFile")),
            Option(
                "--gpsd", value: "HOST:PORT", "gpsd to ask for the position (default 127.0.0.1:2947)",
                sets: .key("location.gpsd")),
            Option(
                "--fixed-location", value: "LAT,LON[,ACC]", "the position of a gate that does not move",
                sets: .key("location.fixed")),
            Option("--no-location", "never attach a position", sets: .disables("location.enabled")),
        ]
        // One `--no-<kind>` per registered read source.
        + SourceRegistry.modules.map { source in
            Option("--no-\(source.kind)", "disable \(source.devices)", sets: .disables(source.enabledKey))
        }
}
