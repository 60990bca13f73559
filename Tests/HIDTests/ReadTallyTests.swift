import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import Platform
import ReadPipeline
import Spool
import Testing

@testable import Bridge

/// Reads through a real pipeline and spool are counted by source and outcome, under the names docs/contracts.md
/// gives `status` (`reads`: `"hid/pending"`, `lastReads`: `"hid:<device>"`) and the labels docs/operations.md
/// gives `plings_bridge_reads_total{source,outcome}`.
struct ReadTallyTests {
    @Test func countsAppearInStatusAndMetricsUnderTheirDocumentedNames() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let spool = try Spool(path: dir.file("spool.sqlite"))
        let logger = Logger(minimum: .error)
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: ["s.plings.io"])),
            fixProvider: NoFixProvider(), debounce: [.hid: 60], logger: logger)
        pipeline.start()
        defer { pipeline.stop(deadline: MonotonicClock.deadline(after: 2)) }
        let outcomes = Mutex<[String]>([])
        func submit(_ raw: String) {
            let done = Monitor(false)
            pipeline.submit(Read(sourceKind: .hid, device: "bench-1", raw: raw, time: Date())) { outcome in
                switch outcome {
                case .accepted(let scan): outcomes.withLock { $0.append(scan.state.rawValue) }
                case .debounced: outcomes.withLock { $0.append("debounced") }
                case .refused: outcomes.withLock { $0.append("refused") }
                }
                done.update { $0 = true }
            }
            _ = done.wait(until: MonotonicClock.deadline(after: 5)) { $0 }
        }
        submit("https://s.plings.io/?t=q&i=A&p=1")
        submit("https://s.plings.io/?t=q&i=A&p=1")  // the same code inside hid's 60 s window: one read
        submit("4006381333931")  // an EAN-13, not a Plings URL
        #expect(outcomes.withLock { $0 } == ["pending", "debounced", "unrecognized"])

        let reporter = StatusReporter(
            statusPath: dir.file("status.json"), metricsPath: nil, spool: spool, pipeline: pipeline,
            sources: [], fixAge: { nil }, logger: logger)
        let status = reporter.snapshot()
        #expect(status["reads"]?["hid/pending"]?.intValue == 1)
        #expect(status["reads"]?["hid/debounced"]?.intValue == 1)
        #expect(status["reads"]?["hid/unrecognized"]?.intValue == 1)
        #expect(status["lastReads"]?["hid:bench-1"]?["outcome"] == .string("unrecognized"))
        let metrics = reporter.metrics(up: true)
        for outcome in ["pending", "debounced", "unrecognized"] {
            #expect(metrics.contains(#"plings_bridge_reads_total{source="hid",outcome="\#(outcome)"} 1"#), "\(metrics)")
        }
    }
}
