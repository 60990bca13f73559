import Foundation
import Platform

/// A rig command failed or did not answer in time.
public struct RigFailure: Error, CustomStringConvertible {
    public let description: String

    public init(description: String) {
        self.description = description
    }
}

/// `Tests/Rigs/nfc/nfc_rig.py`: a real pcscd with the vpcd driver and our tag emulator, driven over stdin.
/// Every command gets exactly one `OK ...` or `ERR ...` line after it took effect.
public final class NFCRig: Sendable {
    public let process: RunningProcess
    /// `OK`/`ERR` answers consumed so far (the next command's answer is the line after them).
    private let answered = Mutex(0)

    /// Starts `script` (the package's `nfc_rig.py` by default) with `arguments` and waits for its `READY`.
    /// `takeLock`: take /tmp/pcscd.lock for the rig's life; false when the caller already holds it (a benchmark
    /// run as `flock /tmp/pcscd.lock plings-bench ...`: a second flock on the file would wait forever).
    public init(
        arguments: [String] = [], script: String = Products.rig("nfc/nfc_rig.py"), takeLock: Bool = true
    ) throws {
        process = try RunningProcess(
            "/usr/bin/python3", ["-c", NFCRig.launcher(takeLock: takeLock), "/usr/bin/python3", script] + arguments)
        guard process.waitForLineCount(1, timeout: 300), process.outputLines.first == "READY" else {
            let first = process.outputLines.first ?? "nothing"
            process.stop()
            throw RigFailure(description: "nfc_rig.py did not get ready: \(first); \(process.stderrText)")
        }
        answered.withLock { $0 = 1 }
    }

    /// A `python3 -c` program that execs `argv[1:]` after clearing the inherited signal mask and, with
    /// `takeLock`, taking /tmp/pcscd.lock (an inherited fd: held until the rig and its pcscd exit).
    /// Why the mask: the test runner's threads block some signals and a spawned child inherits that mask, so
    /// pcscd would never see the rig's SIGTERM and every rig shutdown would cost the rig's 5 s kill timeout.
    /// Why the lock: there is one pcscd per machine, and the soak, the demo and the benchmarks take the same
    /// lock, so rigs never fight over it.
    public static func launcher(takeLock: Bool) -> String {
        let lock =
            takeLock
            ? "lock = os.open('/tmp/pcscd.lock', os.O_CREAT | os.O_RDWR); fcntl.flock(lock, fcntl.LOCK_EX); "
                + "os.set_inheritable(lock, True); " : ""
        return "import fcntl, os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); " + lock
            + "os.execv(sys.argv[1], sys.argv[1:])"
    }

    /// Sends one command and returns its `OK ...` answer; `ERR` or no answer within `timeout` throws.
    @discardableResult
    public func send(_ command: String, timeout: Double = 15) throws -> String {
        // Held for the whole exchange: commands from two threads must not take each other's answers.
        let answer = try answered.withLock { (answered: inout Int) throws(RigFailure) -> String in
            process.send(command)
            guard process.waitForLineCount(answered + 1, timeout: timeout) else {
                throw RigFailure(description: "no answer to '\(command)' within \(timeout)s; \(process.stderrText)")
            }
            answered += 1
            return process.outputLines[answered - 1]
        }
        guard answer.hasPrefix("OK") else { throw RigFailure(description: "'\(command)': \(answer)") }
        return answer
    }

    /// The APDUs the card on `reader` received since its tap.
    public func apdus(_ reader: Int = 0) throws -> [String] {
        let words = try send("apdus \(reader)").split(separator: " ").map(String.init)
        return Array(words.dropFirst(2))
    }

    /// Gives virtual reader `reader` a personality (`plain`, `acr122u`, `part3`) and a delay per exchange.
    public func setReader(_ reader: Int = 0, _ personality: String, delayMilliseconds: Double = 0) throws {
        try send("reader \(reader) \(personality) delay=\(delayMilliseconds)")
    }

    /// The feedback commands (`FF 00 40`, `FF 00 52`) the reader received since its last tap, with the
    /// CLOCK_MONOTONIC second each arrived (the same clock as `MonotonicClock`).
    public func feedback(_ reader: Int = 0) throws -> [(time: Double, apdu: String)] {
        let words = try send("feedback \(reader)").split(separator: " ").dropFirst(2)
        return words.compactMap { word in
            let parts = word.split(separator: ":")
            guard parts.count == 2, let time = Double(parts[0]) else { return nil }
            return (time, String(parts[1]))
        }
    }

    public func close() {
        _ = try? send("quit", timeout: 10)
        // The rig stops pcscd after answering: wait for it, so the next rig finds the vpcd ports free.
        _ = process.waitForExit(timeout: 10)
        process.stop()
    }
}
