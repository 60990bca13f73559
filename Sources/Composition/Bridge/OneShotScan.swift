import BridgeCore
import PlingsAPI
import Foundation
import Location
import Logging
import Platform
import ReadPipeline
import Spool

/// `plings-bridge scan`: one read through the service's own parts: location, input, pipeline into the spool,
/// and one delivery attempt when an API is configured (docs/contracts.md, "Command line"). The CLI parses and
/// prints; this does the work.
public struct OneShotScan: Sendable {
    /// A read as the service would capture it: its time and the fix at that moment.
    public struct Capture: Sendable {
        public let read: Read
        public let fix: LocationFix?
    }

    /// What `--dry-run` would send.
    public enum RequestBody: Sendable {
        /// The exact HTTP request body.
        case body(String)
        /// The read is unrecognized: nothing would be sent, for this reason.
        case unrecognized(reason: String)
    }

    let settings: Settings
    let builder: ScanBuilder
    let logger: Logger

    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.builder = ScanBuilder(parser: PlingsURLParser(hosts: settings.config.hosts))
        self.logger = logger
    }

    /// Captures the read. Location: waits up to 1 s for a live fix from gpsd (a refused connection costs no
    /// wait), then takes the fix fresh now, exactly like a read in the service. gpsd's cached answer to a new
    /// client is not enough: it repeats the last fix for as long as the receiver is silent. `locationLogger`
    /// gets the gpsd connection's lines.
    public func capture(_ raw: String, kind: SourceKind, device: String, locationLogger: Logger) -> Capture {
        let (provider, gps) = LocationSource.makeFixProvider(config: settings.config, logger: locationLogger)
        gps?.start()
        _ = gps?.waitForLiveFix(timeout: 1)
        let now = Date()
        let read = Read(sourceKind: kind, device: device, raw: raw, time: gps?.readTime(now: now) ?? now)
        let fix = provider.currentFix()
        gps?.stop()
        return Capture(read: read, fix: fix)
    }

    /// `--dry-run`: the request the read would become, spooling nothing.
    public func requestBody(_ capture: Capture) -> RequestBody {
        let scan = builder.build(capture.read, fix: capture.fix)
        guard let input = scan.inputJSON else { return .unrecognized(reason: scan.reason ?? "") }
        return .body(GraphQLRequestBody.build(document: settings.config.api.document, inputJSON: input))
    }

    /// Commits the read to `spool` through the pipeline (with the captured fix), then, for a pending scan with an
    /// API configured (`token` given), makes the one delivery attempt (`OneShotDelivery`).
    public func commit(_ capture: Capture, to spool: Spool, token: String?) -> ReadOutcome {
        let fixProvider: any FixProvider = capture.fix.map { FixedFixProvider(fix: $0) } ?? NoFixProvider()
        SinkRegistry.registerQueues(in: spool, config: settings.config, logger: logger)
        let pipeline = Pipeline(
            spool: spool, builder: builder, fixProvider: fixProvider, debounce: [:], logger: logger)
        pipeline.start()
        let outcome = pipeline.accept(capture.read)
        pipeline.stop()
        if case .accepted(let scan) = outcome, scan.state == .pending, let api = settings.apiSettings(token: token) {
            OneShotDelivery.deliver(scanID: scan.id, spool: spool, api: api, logger: logger)
        }
        return outcome
    }
}
