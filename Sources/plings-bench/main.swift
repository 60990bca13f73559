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
case "nfc":
    NFCBenchmark.run(arguments: Array(arguments.dropFirst()))
case "writer":
    SpoolWriter.run(arguments: Array(arguments.dropFirst()))
default:
    print(
        """
        Usage: plings-bench <benchmark> [options]
          spool [--count N] [--dir DIR]   durable spool commits/s against raw SQLite, single reads and a burst
          nfc [--taps 30] [--idle 60]     tap-to-commit latency on the NFC rig against pyscard, APDUs, idle CPU
        """)
    exit(command == "help" || command == "--help" ? 0 : 2)
}
