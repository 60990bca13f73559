import BridgeCore
import Platform

/// The running service's status, built in one place and read by every publisher (docs/architecture.md, "Status"):
/// the status reporter builds it (the `status --json` object, the metrics text, the device's health in a few
/// fields) and writes `status.json`; the local interface's `/status`, `/metrics` and event stream and MQTT's
/// retained status message read it here. It exists before any part of the service, so a part that publishes the
/// status and a status that shows that part need no binding after both are made.
///
/// Parts say that something in it changed (`changed()`: a commit, a source's device, a sink's health;
/// `changedSoon()`: deliveries, one build a second during a drain); the builder waits for those here
/// (`waitForNextBuild`), as on a `PeriodicThread`: wakes that come during a build fold into one more build.
public final class StatusBoard: Sendable {
    private struct State {
        var status: JSONValue = .null
        var metrics = ""
        var device: JSONValue = .null
        /// A build is wanted as soon as the current one ends.
        var woken = false
        /// The soonest a `changedSoon()` wants a build (monotonic), infinity when none.
        var due = Double.infinity
        /// When the last build was published (monotonic).
        var lastBuilt = -Double.infinity
        /// Readers that asked for a fresh status count up `asked`; a build serves every ask made before it began.
        var asked = 0
        var building = 0
        var served = 0
        /// A reader asked for the metrics: the next build makes them (otherwise only when the textfile is due).
        var metricsWanted = false
        /// A builder runs (from its first build until `close`): fresh readers wait for it.
        var builderRuns = false
        var closed = false
    }

    private let state = Monitor(State())

    public init() {}

    // MARK: what publishers read

    /// The `status --json` object as of the last build (`.null` before the first).
    public func status() -> JSONValue { state.withLock { $0.status } }

    /// The metrics text (the Prometheus text format of `metrics.textfile`) as of the last build.
    public func metrics() -> String { state.withLock { $0.metrics } }

    /// The status of a build that began after this call, for a reader that must not show an older one (the local
    /// interface's `/status` and `/metrics`, asked right after a scan): it waits for it at most `within` seconds,
    /// and not at all while no builder runs.
    public func fresh(within seconds: Double = 1, metrics: Bool = false) -> (status: JSONValue, metrics: String) {
        let ask = state.update { s -> Int? in
            guard s.builderRuns else { return nil }
            s.asked += 1
            s.woken = true
            if metrics { s.metricsWanted = true }
            return s.asked
        }
        if let ask {
            _ = state.wait(until: MonotonicClock.deadline(after: seconds)) { $0.served >= ask || !$0.builderRuns }
        }
        return state.withLock { ($0.status, $0.metrics) }
    }

    /// The device's health in a few fields that change only with it (MQTT's retained status message): version,
    /// sources up, spool backlog, last read, fix; `unpublished` is what `sinkPending` says the sink still owes.
    public func device(sinkPending: Int) -> JSONValue {
        guard case .object(let members) = state.withLock({ $0.device }) else { return .null }
        return .object(
            members.map { key, value in
                guard key == "spool", case .object(let spool) = value else { return (key, value) }
                // Beside `pending`, where the message has always had it.
                let at = (spool.firstIndex { $0.0 == "pending" }).map { $0 + 1 } ?? spool.count
                var members = spool
                members.insert(("unpublished", .integer(sinkPending)), at: at)
                return (key, .object(members))
            })
    }

    // MARK: what parts say

    /// Something the status shows changed: a build as soon as the current one ends.
    public func changed() { state.update { $0.woken = true } }

    /// Counts changed (a sink delivered): a build within `gap` seconds of the last, so a drain costs one a second.
    public func changedSoon(within gap: Double = 1) {
        state.update { s in
            let at = s.lastBuilt + gap
            if at <= MonotonicClock.now() { s.woken = true } else { s.due = min(s.due, at) }
        }
    }

    // MARK: the builder

    /// Begins a build: every fresh-status ask made so far is served by it. Returns whether a reader wants the
    /// metrics.
    public func beginBuild() -> Bool {
        state.withLock { s in
            s.builderRuns = !s.closed
            s.building = s.asked
            defer { s.metricsWanted = false }
            return s.metricsWanted
        }
    }

    /// Publishes a build (`metrics` nil: the last ones stand); returns whether the status or the device's health
    /// differ from the last build's (ignoring `updatedAt`), so the builder wakes the publishers only then.
    @discardableResult
    public func publish(status: JSONValue, metrics: String?, device: JSONValue) -> Bool {
        state.update { s in
            let changed =
                s.status.removing(key: "updatedAt") != status.removing(key: "updatedAt") || s.device != device
            s.status = status
            if let metrics { s.metrics = metrics }
            s.device = device
            s.served = s.building
            s.lastBuilt = MonotonicClock.now()
            return changed
        }
    }

    /// The builder's wait between builds: until a part asks for one (`changed`, a due `changedSoon`, a fresh-status
    /// reader) or `period` seconds after the last build. False once `close` was called.
    public func waitForNextBuild(period: Double) -> Bool {
        state.update { $0.builderRuns = !$0.closed }
        while true {
            let until = state.withLock { min($0.lastBuilt + period, $0.due) }
            var closed = false
            state.wait(until: until) { s in
                closed = !s.builderRuns
                return closed || s.woken || s.due < until
            }
            if closed { return false }
            let now = MonotonicClock.now()
            let go = state.update { s -> Bool in
                if s.woken || now >= s.due || now >= s.lastBuilt + period {
                    s.woken = false
                    s.due = .infinity
                    return true
                }
                return false
            }
            if go { return true }
        }
    }

    /// Ends the builder's wait for good (the service stops): readers no longer wait for fresh builds.
    public func close() {
        state.update { s in
            s.closed = true
            s.builderRuns = false
        }
    }
}
