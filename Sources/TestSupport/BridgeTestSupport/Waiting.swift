import Foundation
import Platform

/// Values handed over from another thread (a source's reader thread, the pipeline's commit thread) that a
/// test or benchmark waits for by count, always with a deadline. Waiting is on a condition signalled by
/// each `append`, not a re-check loop.
public final class Collector<Value: Sendable>: Sendable {
    private let values = Monitor<[Value]>([])

    public init() {}

    public func append(_ value: Value) { values.update { $0.append(value) } }

    /// Everything appended so far, in order.
    public var all: [Value] { values.withLock { $0 } }

    /// Waits until at least `count` values arrived; false when `timeout` seconds (monotonic) passed first.
    @discardableResult
    public func wait(count: Int, timeout: Double = 15) -> Bool {
        values.wait(until: MonotonicClock.deadline(after: timeout)) { $0.count >= count }
    }
}

/// Re-checks `condition` every 10 ms until it holds or `timeout` seconds pass. Only for states that change
/// with no event to wait on: time passing (a fix going stale) or a source's summary. Where an event
/// exists, wait on it instead (`Collector.wait`, `RunningProcess.waitForLine`, `GPSClient.waitFor...`).
public func eventually(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = MonotonicClock.deadline(after: timeout)
    while MonotonicClock.now() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}
