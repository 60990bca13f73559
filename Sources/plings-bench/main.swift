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
case "drain":
    DrainBenchmark.run(arguments: Array(arguments.dropFirst()))
case "location":
    LocationBenchmark.run(arguments: Array(arguments.dropFirst()))
case "hid":
    HIDBenchmark.run(arguments: Array(arguments.dropFirst()))
case "writer":
    SpoolWriter.run(arguments: Array(arguments.dropFirst()))
default:
    print(
        """
        Usage: plings-bench <benchmark> [options]
          spool [--count N] [--dir DIR]   durable spool commits/s against raw SQLite, single reads and a burst
          drain [--count N] [--large N]   API drain throughput against a baseline client; large-drain time and RSS
          location [--seconds N]          latency a fix adds to a read; gpsd client CPU at 1 Hz and 10 Hz (60 s each)
          hid [--lines N] [--samples N] [--dir DIR]
                                          decoder events/s, reader loop through a pipe, KEY_ENTER -> committed
        """)
    exit(command == "help" || command == "--help" ? 0 : 2)
}
