import Bridge
import BridgeCore
import CSQLite
import Foundation
import Logging
import Spool

/// `plings-bench`: benchmarks with their baselines, measured in one run (see docs/benchmarks.md).
/// Also `writer`, a spool-writing child process used by the crash and concurrency tests.
let arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.first ?? "help"

switch command {
case "spool":
    SpoolBenchmark.run(arguments: Array(arguments.dropFirst()))
case "spool-scale":
    SpoolScaleBenchmark.run(arguments: Array(arguments.dropFirst()))
case "drain":
    DrainBenchmark.run(arguments: Array(arguments.dropFirst()))
case "mqtt":
    MQTTBenchmark.run(arguments: Array(arguments.dropFirst()))
case "location":
    LocationBenchmark.run(arguments: Array(arguments.dropFirst()))
case "hid":
    HIDBenchmark.run(arguments: Array(arguments.dropFirst()))
case "transports":
    ScannerTransportBenchmark.run(arguments: Array(arguments.dropFirst()))
case "idle":
    IdleBenchmark.run(arguments: Array(arguments.dropFirst()))
case "http":
    HTTPBenchmark.run(arguments: Array(arguments.dropFirst()))
case "delivery-model":
    DeliveryModelBenchmark.run(arguments: Array(arguments.dropFirst()))
case "all":
    // Every benchmark in one go (rigs started by each), one table at the end. Short settings by default;
    // `--full` uses each benchmark's documented defaults.
    let full = arguments.contains("--full")
    BenchTable.collected.withLock { $0 = [] }
    SpoolBenchmark.run(arguments: full ? [] : ["--count", "2000"])
    HIDBenchmark.run(arguments: [])
    ScannerTransportBenchmark.run(arguments: full ? [] : ["--samples", "100", "--idle", "5"])
    NFCBenchmark.run(arguments: full ? [] : ["--taps", "30", "--idle", "20"])
    LocationBenchmark.run(arguments: full ? [] : ["--seconds", "20"])
    DrainBenchmark.run(arguments: full ? [] : ["--count", "10000", "--large", "100000"])
    MQTTBenchmark.run(arguments: full ? [] : ["--count", "10000", "--large", "100000"])
    IdleBenchmark.run(arguments: [])
    HTTPBenchmark.run(arguments: full ? ["--browser"] : ["--samples", "100"])
    let rows = BenchTable.collected.withLock { $0 ?? [] }
    BenchTable.printTable(rows)
case "nfc":
    NFCBenchmark.run(arguments: Array(arguments.dropFirst()))
case "evemu":
    EvemuCommand.run(arguments: Array(arguments.dropFirst()))
case "writer":
    SpoolWriter.run(arguments: Array(arguments.dropFirst()))
default:
    print(
        """
        Usage: plings-bench <benchmark> [options]
          all [--full]                    every benchmark below in one run, one table
          spool [--count N] [--dir DIR] [--no-scale]
                                          durable spool commits/s against raw SQLite, single reads and a burst;
                                          then spool-scale
          spool-scale [--sizes 0,100000,1000000] [--dir DIR]
                                          commit latency and CLI times on large spools against an empty one;
                                          the longest commit stall during a purge of 600,000
          drain [--count N] [--large N]   API drain throughput against a baseline client; large-drain time and RSS
          mqtt [--count N] [--large N] [--inflight W]
                                          MQTT drain (QoS 1) against a paho-mqtt client; large-drain time and RSS
          location [--seconds N]          latency a fix adds to a read; gpsd client CPU at 1 Hz and 10 Hz (60 s each)
          hid [--lines N] [--samples N] [--dir DIR]
                                          decoder events/s, reader loop through a pipe, KEY_ENTER -> committed
          transports [--samples N] [--idle S] [--dir DIR]
                                          HID POS report and serial CR -> committed against the keyboard's Enter,
                                          HID POS decoding, idle CPU of both transports
          idle [--seconds 30] [--baseline-bridge PATH]
                                          wake-ups of an idle `run` in each waiting state; a scan spooled by
                                          another process -> sent (PATH: an older build, measured as the baseline)
          delivery-model [--count 1000000] [--dir DIR]
                                          the first open of an older spool of COUNT scans, migrating it to one
                                          delivery model: seconds, the WAL it leaves, the file's growth
          http [--samples N] [--clients 50] [--browser]
                                          read -> committed with 50 /events clients (one stalled) against none;
                                          commit -> SSE event; RSS; with --browser commit -> bench page row
          nfc [--taps 30] [--idle 60]     tap-to-commit latency on the NFC rig against pyscard, APDUs, idle CPU
          evemu --text TEXT [--layout us] [--start S]
                                          prints a scanner typing TEXT as evemu lines (for umockdev-run -e)
        """)
    exit(command == "help" || command == "--help" ? 0 : 2)
}
