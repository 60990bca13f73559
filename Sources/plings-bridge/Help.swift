/// Help texts, one per command.
enum Help {
    static let main = """
        plings-bridge: reads Plings NFC tags and QR codes from fixed hardware and reports them to the Plings API.

        Usage: plings-bridge <command> [options]

        Commands:
          run                      the service: sources, pipeline, spool, forwarder (until SIGTERM/SIGINT)
          scan TEXT                one read through the pipeline; prints the spool record as JSON
          spool list|stats|retry|export|purge
                                   inspect and manage the local spool
          status                   the running service: sources, last reads, spool, delivery
          doctor                   checks pcscd, readers, udev rules, scanners, gpsd, clock, spool, API
          gps                      gpsd status: connected, mode, position, accuracy, fix age, satellites
          scanners [--json]        USB HID barcode scanners: match reason, open/grab check; --watch reads them
          readers                  PC/SC readers: card present, ATR, tag kind, UID
          test-read                read N taps and show UID, URL, APDUs and timings (for hardware testers)
          version                  version and linked library versions
          help [COMMAND]           this text, or a command's

        Options every command takes:
          --config PATH            JSON config (default /etc/plings-bridge/config.json when present)
          --spool PATH             the spool database (default under $STATE_DIRECTORY or ~/.local/state)
          --json                   machine-readable output
          --log-level LEVEL        debug, info, warn or error (default info)
          -h, --help               help

        Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.
        """

    static let sourceOptions = """
          --api-url URL            deliver to this GraphQL endpoint (https://; http:// to loopback with
                                   api.allowInsecureHTTP)
          --api-token-file PATH    bearer token file (never pass the token itself on the command line)
          --gpsd HOST:PORT         gpsd to ask for the position (default 127.0.0.1:2947)
          --fixed-location LAT,LON[,ACC]
                                   the position of a gate that does not move
          --no-location            never attach a position
          --no-nfc, --no-hid       disable a source
        """

    static let gps = """
        Usage: plings-bridge gps [--json] [--gpsd HOST:PORT] [options]

        Asks gpsd (location.gpsd, default 127.0.0.1:2947) for its status, waiting up to 2 s for a report:
        connected or not, fix mode, position, accuracy (metres), fix age, satellites used/visible, and the
        system clock's offset from GPS time. gpsd not running is reported (connected false), exit 0.
          --gpsd HOST:PORT         the gpsd to ask
          --json                   {"connected", "mode", "latitude", "longitude", "accuracy", "fixAge",
                                   "satellitesUsed", "satellitesVisible", "clockOffset", ...}; null when unknown
        """

    static let run = """
        Usage: plings-bridge run [options]

        Runs the service until SIGTERM or SIGINT (graceful: commits the read in hand, stops within 5 s).
        SIGHUP reloads the configuration. With no api.url, scans wait in the local spool.

        \(sourceOptions)
        """

    static let scan = """
        Usage: plings-bridge scan TEXT [--source nfc|hid|manual] [--dry-run] [options]

        Sends TEXT (a Plings URL, or anything a scanner could type) through the same pipeline as a real read:
        location fix, input, spool, and one delivery attempt when an API is configured. Prints the spool
        record as JSON. Exit 0 when the read was accepted into the spool (unrecognized reads included).
          --source KIND            the source to record (default manual)
          --device NAME            the device name to record (default cli)
          --dry-run                print the exact HTTP request body; spool nothing

        \(sourceOptions)
        """

    static let spool = """
        Usage: plings-bridge spool <subcommand> [options]

          list [--state S] [--limit N] [--json]
                                   scans in capture order (JSON: one object per line)
          stats [--json]           counts per state, oldest pending age, last delivery error
          retry ID | --dead        revive a dead scan (or all of them) for delivery
          export                   every scan as JSON lines (for backup or hand-over)
          purge --delivered --older-than AGE
                                   delete delivered scans older than AGE (e.g. 7d, 12h, 3600)
        Pending, dead and unrecognized scans are never purged.
        """

    static let doctor = """
        Usage: plings-bridge doctor [--json] [options]

        Checks everything a gate needs, one line each with the fix: configuration, spool (writable, free disk,
        schema), API (reachable, token accepted), readers and pcscd, scanners, gpsd, udev and polkit rules,
        clock. Runs without hardware and says so. Exit 0 when nothing failed, 1 otherwise.
        \(sourceOptions)
        """

    static let status = """
        Usage: plings-bridge status [--json] [--spool PATH]

        The running service's snapshot: sources, last read per device, spool counts, delivery state and the
        last error. Exit 1 when the service is not running.
        """

    static let scanners = """
        Usage: plings-bridge scanners [--json] [options]
               plings-bridge scanners --watch [--count N] [--duration SECONDS] [--pipeline] [options]

        Lists every keyboard udev knows: devnode, vendor:model (4-digit hex), serial, ID_PATH, whether it is
        a scanner and why (the udev rule's PLINGS_SCANNER=1, or a hid.match rule), and whether it can be
        opened and grabbed now (a scanner held by a running plings-bridge says "grabbed by another process").
        JSON: an array of {"devnode", "name", "vendor", "model", "serial", "path", "matched", "reason",
        "openable", "grabbable", "stableName", "layout", "problem"}; empty when there is nothing.

          --watch                  read the scanners as `run` would (grab, layout, suffix) and print each
                                   line as JSON {"device", "raw", "time"}; stops after --count lines or
                                   --duration seconds, else runs until interrupted
          --pipeline               with --watch: also commit each line to the spool through the pipeline
                                   (hid.debounce applies) and print its outcome
        """

    static let version = """
        Usage: plings-bridge version [--json]

        Prints the version and the versions of the linked libraries.
        """

    static let readers = """
        Usage: plings-bridge readers [--json] [--config PATH]

        Lists the PC/SC readers pcscd knows, whether a card is on each, its ATR, tag kind and UID, and whether
        nfc.readers selects the reader. No pcscd or no readers is an empty list (exit 0); the line says why.
          --json                   an array of {"name", "cardPresent", "atr", "tagKind", "tagName", "uid",
                                   "selected", "note"}
        """

    static let testRead = """
        Usage: plings-bridge test-read [--reader NAME] [--count N] [--timeout S] [--json] [--config PATH]

        Waits for N taps (default 1) and prints, per tap, the UID, tag kind, URL, APDU count, detect-to-read
        and read time, or the error; then a summary with the success rate and the median and p95
        detect-to-read time. Nothing is spooled. Exit 1 when a read failed or a tap did not come in time.
          --reader NAME            only this reader (a shell-style pattern; default nfc.readers, else all)
          --count N                taps to wait for (default 1)
          --timeout S              seconds to wait for each tap (default 60)
          --json                   one JSON object per tap, then {"summary": {...}}
        """
}
