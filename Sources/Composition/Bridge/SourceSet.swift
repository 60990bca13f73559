import BridgeCore
import Foundation
import Logging
import Platform
import SinkKit
import SourceKit
import ReadPipeline

/// The running read sources, one per registered kind the configuration enables (`SourceRegistry`). A reload
/// replaces exactly the sources whose settings changed, so one enabled, disabled or reconfigured in the file takes
/// effect without a restart.
///
/// Reads already handed to the pipeline are not affected by a rebuild: the pipeline outlives the sources. Sources
/// are independent of each other, so they start and stop together, each on a thread of its own, all by one
/// deadline.
public final class SourceSet: Service {
    private struct Running: Sendable {
        var sources: [SourceKind: any ReadSource] = [:]
        var config: BridgeConfig?
    }

    public let name = "sources"
    private let modules: [ReadSourceModule]
    private let running = Mutex(Running())
    private let initial: BridgeConfig
    private let logger: Logger
    private let commit: @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void
    private let stateChanged: @Sendable () -> Void

    /// Nothing starts before `start()`, which starts what `config` enables. `commit` hands a read on and reports
    /// its commit (the pipeline's `commit(_:then:)`), so a source's feedback can wait for it.
    public init(
        config: BridgeConfig, logger: Logger, modules: [ReadSourceModule] = SourceRegistry.modules,
        commit: @escaping @Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void,
        stateChanged: @escaping @Sendable () -> Void = {}
    ) {
        self.stateChanged = stateChanged
        self.initial = config
        self.logger = logger
        self.modules = modules
        self.commit = commit
    }

    public func start() { apply(initial) }

    /// Stops every source together, by `deadline`.
    public func stop(deadline: Double) {
        let current = running.withLock { $0.sources.values }
        OwnThread.together(name: "source-stop", current.map { source in { source.stop(deadline: deadline) } })
    }

    /// How long a source being replaced by a reload may take to stop (NFC's feedback waits for an LED sequence).
    static let replaceBudget: Double = 2.5

    /// Starts the sources `config` enables, stopping those it no longer does (or whose settings changed).
    /// Blocking (a source's start waits for its devices): call it from a thread of its own.
    public func apply(_ config: BridgeConfig) {
        let previous = running.withLock { $0 }
        var next = Running(sources: previous.sources, config: config)
        var retiring: [any ReadSource] = []
        var starting: [any ReadSource] = []
        let context = SourceContext(config: config, logger: logger, commit: commit, stateChanged: stateChanged)
        for module in modules {
            let old = previous.sources[module.kind]
            let changed = previous.config.map { module.settingsChanged($0, config) } ?? true
            guard changed || old == nil else { continue }
            if let old { retiring.append(old) }
            next.sources[module.kind] = nil
            if module.isEnabled(config) {
                let source = module.make(context)
                starting.append(source)
                next.sources[module.kind] = source
            }
        }
        let deadline = MonotonicClock.deadline(after: SourceSet.replaceBudget)
        OwnThread.together(name: "source-stop", retiring.map { source in { source.stop(deadline: deadline) } })
        OwnThread.together(name: "source-start", starting.map { source in { source.start() } })
        running.withLock { $0 = next }
    }

    /// Each registered kind's state, for the start-up summary and `status`.
    public var states: [(kind: SourceKind, state: SourceState)] {
        let current = running.withLock { $0 }
        let config = current.config ?? initial
        return modules.map { module in
            let state =
                current.sources[module.kind]?.state
                ?? SourceState(module.isEnabled(config) ? "starting" : "disabled", up: false)
            return (module.kind, state)
        }
    }

    /// One line per source kind.
    public var summaries: [(kind: String, state: String)] { states.map { ($0.kind.rawValue, $0.state.summary) } }

    /// The running source of `kind`, nil while it is off.
    public func source(_ kind: SourceKind) -> (any ReadSource)? { running.withLock { $0.sources[kind] } }

    /// Status reporter entries: a source is "up" when it has at least one working device.
    public var reporterSources: [StatusReporter.Source] {
        modules.map { module in
            let kind = module.kind
            return StatusReporter.Source(
                kind: kind.rawValue,
                state: { [self] in states.first { $0.kind == kind }?.state.summary ?? "" },
                up: { [self] in states.first { $0.kind == kind }?.state.isUp ?? false },
                details: { [self] in source(kind)?.statusDetails ?? [] })
        }
    }

    /// The debounce window of every registered kind (`manual` reads are never debounced).
    public static func debounceWindows(_ config: BridgeConfig, modules: [ReadSourceModule] = SourceRegistry.modules)
        -> [SourceKind: Double]
    {
        var windows: [SourceKind: Double] = [.manual: 0]
        for module in modules { windows[module.kind] = module.debounce(config) }
        return windows
    }
}
