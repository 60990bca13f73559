import Foundation
import Logging
import Platform

/// The lifecycle every node-based source shares around its `DeviceNodeLoop`: the reader thread (started once, ready
/// once the nodes present at start are open), the stop flag and wake pipe, and the status the loop publishes (the
/// open nodes, or a note saying why none is read), from which the source's state is told.
public final class DeviceNodeReader: Sendable {
    public struct Status: Sendable {
        public var nodes: [(devnode: String, name: String)] = []
        /// Why nothing is read (disabled, no rule); nil while the reader runs.
        public var note: String?
    }

    /// Start, stop and the wake pipe that interrupts the loop's `poll()`.
    public let control = ReaderControl()
    private let status = Mutex(Status())
    private let thread: ReaderThread
    private let what: String
    private let logger: Logger
    /// Told after the status changed (`SourceContext.stateChanged`).
    private let stateChanged: @Sendable () -> Void

    /// `name`: the reader thread's ("serial-reader"); `what`: the source in log lines ("serial").
    public init(name: String, what: String, logger: Logger, stateChanged: @escaping @Sendable () -> Void) {
        thread = ReaderThread(name: name)
        self.what = what
        self.logger = logger
        self.stateChanged = stateChanged
    }

    /// Nothing will be read, for this reason (the section is disabled, no rule names a device).
    public func idle(because note: String) { status.withLock { $0.note = note } }

    /// Starts the reader thread running `loop` and waits (at most 2 s) until it has opened the nodes present now.
    public func start(_ loop: @escaping @Sendable (_ ready: @escaping @Sendable () -> Void) -> Void) {
        guard control.markStarted() else { return }
        thread.start(readyWithin: 2, loop)
    }

    /// Stops the reader thread, which closes every node, by `deadline` (its `poll()` wakes on the pipe at once).
    public func stop(deadline: Double) {
        thread.expectEnd()
        guard control.requestStop() else { return }
        if !thread.waitForEnd(until: deadline) { logger.warn("\(what) reader did not stop in time") }
    }

    /// The loop's `DeviceNodeKind.nodesChanged`: the open nodes by devnode and name.
    public func publish(_ nodes: [(devnode: String, name: String)]) {
        status.withLock { $0.nodes = nodes.sorted { $0.devnode < $1.devnode } }
        stateChanged()
    }

    /// The source's state: the note, `waiting` with no node open, else "reading N <noun>: devnode (name), ...";
    /// up while a node is read.
    public func state(noun: String, waiting: String) -> (text: String, up: Bool) {
        status.withLock { status in
            if let note = status.note { return (note, false) }
            if status.nodes.isEmpty { return (waiting, false) }
            let nodes = status.nodes.map { "\($0.devnode) (\($0.name))" }.joined(separator: ", ")
            return ("reading \(status.nodes.count) \(noun): \(nodes)", true)
        }
    }
}
