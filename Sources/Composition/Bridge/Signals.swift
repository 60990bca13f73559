import CSysShim
import Glibc
import Platform

/// Process signals through the self-pipe pattern: a C handler writes the signal's number to a pipe, and `next()`
/// blocks in `read` on it. No Swift code runs in a signal handler, and nothing wakes while no signal comes.
///
/// Not libdispatch's signal sources: a process that uses libdispatch's queues is woken every second by its pool
/// monitor, which woke an idle bridge 30 times in 30 s (issue 27: an idle box sleeps).
public final class SignalPipe: Sendable {
    /// Blocking read end; the handler's write end is non-blocking (a full pipe must never block a handler).
    /// Both stay open for the life of the process: the handler may write at any time.
    private let pipe: FileDescriptor.Pipe

    /// Nil when no pipe or no handler could be made (out of descriptors): the default actions stay, so SIGTERM
    /// still ends the process.
    public init?(_ signals: [Int32]) {
        guard let pipe = try? FileDescriptor.pipe(nonBlocking: false) else { return nil }
        guard fcntl(pipe.writeEnd.rawValue, F_SETFL, O_NONBLOCK) == 0,
            plings_signals_to_pipe(pipe.writeEnd.rawValue, signals, Int32(signals.count)) == 0
        else { return nil }
        self.pipe = pipe
    }

    /// Sleeps until the next signal and returns its number; nil if the pipe failed (never expected).
    public func next() -> Int32? {
        var byte: [UInt8] = [0]
        guard let count = try? pipe.readEnd.read(into: &byte), count == 1 else { return nil }
        return Int32(byte[0])
    }

    /// What `next()` returns for `post(.workerEnded)`: no signal has the number 0.
    public static let workerEnded: Int32 = 0

    /// Wakes `next()` with `number` from any thread, as a signal would (a worker that ended unasked posts
    /// `workerEnded`). Never blocks: a full pipe already holds a wake-up.
    public func post(_ number: Int32) {
        _ = try? pipe.writeEnd.writeAll([UInt8(truncatingIfNeeded: number)])
    }

    /// A dead peer (gpsd, the API) must end in EPIPE, not kill the process.
    public static func ignoreSIGPIPE() { signal(SIGPIPE, SIG_IGN) }
}
