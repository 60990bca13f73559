import BridgeCore
import Foundation
import HID
import Logging
import NFC
import Platform

/// The running input sources (NFC readers, HID scanners), rebuilt as a whole on SIGHUP so a source
/// enabled, disabled or reconfigured in the file takes effect without a restart.
///
/// Reads already handed to the pipeline are not affected by a rebuild: the pipeline outlives the sources.
public final class SourceSet: Service {
    private struct Running: Sendable {
        var hid: HIDSource?
        var nfc: NFCSource?
        var config: BridgeConfig?
    }

    public let name = "sources"
    private let running = Mutex(Running())
    private let initial: BridgeConfig
    private let logger: Logger
    private let submit: @Sendable (Read) -> Void
    private let pipeline: Pipeline?

    /// Nothing starts before `start()`, which starts what `config` enables. `pipeline`: when given, NFC reads
    /// go to it directly so the reader's feedback can wait for the commit.
    public init(
        config: BridgeConfig, logger: Logger, submit: @escaping @Sendable (Read) -> Void, pipeline: Pipeline? = nil
    ) {
        self.initial = config
        self.logger = logger
        self.submit = submit
        self.pipeline = pipeline
    }

    public func start() { apply(initial) }

    public func stop(deadline: Double) { stop() }

    /// Starts the sources `config` enables, stopping those it no longer does (or whose settings changed).
    public func apply(_ config: BridgeConfig) {
        let previous = running.withLock { $0 }
        var next = Running(hid: previous.hid, nfc: previous.nfc, config: config)
        if previous.config?.hid != config.hid || previous.hid == nil {
            previous.hid?.stop()
            next.hid = nil
            if config.hid.enabled {
                let hid = HIDSource(config: config.hid, logger: logger, submit: submit)
                hid.start()
                next.hid = hid
            }
        }
        if previous.config?.nfc != config.nfc || previous.config?.hosts != config.hosts || previous.nfc == nil {
            previous.nfc?.stop()
            next.nfc = nil
            if config.nfc.enabled {
                let nfc = NFCSource(
                    config: config.nfc, hosts: config.hosts, logger: logger, submit: submit,
                    commit: pipeline.map(SourceSet.committer))
                nfc.start()
                next.nfc = nfc
            }
        }
        running.withLock { $0 = next }
    }

    /// Submits to the pipeline and reports the commit in the NFC source's terms.
    public static func committer(_ pipeline: Pipeline)
        -> @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    {
        { read, done in
            pipeline.submit(read) { outcome in
                switch outcome {
                case .accepted(let scan): done(.committed(pending: scan.state == .pending))
                case .debounced: done(.duplicate)
                case .refused: done(.refused)
                }
            }
        }
    }

    /// The NFC source's feedback counters, nil while NFC is off.
    public var nfcFeedback: NFCFeedbackCounters? { running.withLock { $0.nfc }?.feedbackCounters }

    public func stop() {
        let current = running.withLock { $0 }
        current.hid?.stop()
        current.nfc?.stop()
    }

    /// Each source kind's state, for the start-up summary and `status`.
    public var states: [(kind: String, state: SourceState)] {
        let current = running.withLock { $0 }
        let config = current.config ?? BridgeConfig()
        return [
            ("nfc", current.nfc?.state ?? SourceState(config.nfc.enabled ? "starting" : "disabled", up: false)),
            ("hid", current.hid?.state ?? SourceState(config.hid.enabled ? "starting" : "disabled", up: false)),
        ]
    }

    /// One line per source kind.
    public var summaries: [(kind: String, state: String)] { states.map { ($0.kind, $0.state.summary) } }

    /// Status reporter entries: a source is "up" when it has at least one working device.
    public var reporterSources: [StatusReporter.Source] {
        ["nfc", "hid"].map { kind in
            StatusReporter.Source(
                kind: kind,
                state: { [self] in states.first { $0.kind == kind }?.state.summary ?? "" },
                up: { [self] in states.first { $0.kind == kind }?.state.isUp ?? false },
                details: { [self] in
                    guard kind == "nfc", let counters = nfcFeedback else { return [] }
                    return [("feedback", counters.json)]
                })
        }
    }
}
