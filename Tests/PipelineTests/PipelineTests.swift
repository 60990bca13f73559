import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import Platform
import ReadPipeline
import Spool
import Testing

/// The pipeline in process, against a real SQLite spool in a temporary directory: what it commits, what it
/// acknowledges and when, what it drops as a repeat, and the position it couples to each read.
struct PipelineTests {
    /// A fix the "GPS" has at the moment of every read.
    struct StaticFix: FixProvider {
        let fix: LocationFix
        func currentFix() -> LocationFix? { fix }
    }

    static let url = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJ&p=4.2.3.3.6"

    func make(
        _ dir: TemporaryDirectory, debounce: Double = 2, fix: (any FixProvider)? = nil,
        onCommitted: @escaping @Sendable ([NewScan]) -> Void = { _ in }
    ) throws -> (Pipeline, Spool) {
        let spool = try Spool(path: dir.file("spool.sqlite"))
        let pipeline = Pipeline(
            spool: spool, builder: ScanBuilder(parser: PlingsURLParser()), fixProvider: fix ?? NoFixProvider(),
            debounce: [.manual: 0, SourceKind("test"): debounce], logger: Logger(minimum: .error),
            onCommitted: onCommitted)
        pipeline.start()
        return (pipeline, spool)
    }

    /// `n` in base58 (identifiers have no 0, O, I or l).
    static func base58(_ n: Int) -> String {
        let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")
        var n = n
        var text = ""
        repeat {
            text = String(alphabet[n % 58]) + text
            n /= 58
        } while n > 0
        return text
    }

    func read(_ raw: String, device: String = "bench-1") -> Read {
        Read(sourceKind: SourceKind("test"), device: device, raw: raw, time: Date())
    }

    /// Submits `read` and waits (10 s at most) for its outcome, on this thread: never on Swift's cooperative
    /// pool, which the rest of a parallel test run may keep busy for longer than a debounce window.
    func accept(_ pipeline: Pipeline, _ read: Read) -> ReadOutcome? {
        let outcome = Monitor<ReadOutcome?>(nil)
        pipeline.submit(read) { result in outcome.update { $0 = result } }
        _ = outcome.wait(until: MonotonicClock.deadline(after: 10)) { $0 != nil }
        return outcome.withLock { $0 }
    }

    @Test func everyReadFromManyThreadsIsAcknowledgedOnlyOnceItIsInTheSpool() throws {
        let dir = TemporaryDirectory("pipeline")
        defer { dir.remove() }
        let (pipeline, spool) = try make(dir)
        let acknowledged = Monitor((count: 0, missing: [String](), ids: Set<String>()))
        let threads = 4
        let perThread = 50
        for t in 0..<threads {
            Thread {
                for n in 0..<perThread {
                    pipeline.submit(
                        read("https://s.plings.io/?t=q&i=A\(Self.base58(t * 1000 + n))&p=1", device: "scanner-\(t)")
                    ) {
                        outcome in
                        guard case .accepted(let scan) = outcome else { return }
                        // Acknowledged after the commit: another connection already sees the row.
                        let seen = (try? spool.record(id: scan.id)) != nil
                        acknowledged.update {
                            $0.count += 1
                            $0.ids.insert(scan.id)
                            if !seen { $0.missing.append(scan.id) }
                        }
                    }
                }
            }.start()
        }
        let done = acknowledged.wait(until: MonotonicClock.deadline(after: 20)) { $0.count == threads * perThread }
        pipeline.stop()
        #expect(done)
        let state = acknowledged.withLock { $0 }
        #expect(state.missing.isEmpty, "acknowledged before they were visible: \(state.missing.prefix(3))")
        #expect(state.ids.count == threads * perThread)
        #expect(try spool.stats().counts[.pending] == threads * perThread)
    }

    @Test func aRepeatInsideTheWindowIsOneReadAndOtherDevicesAreNotAffected() throws {
        let dir = TemporaryDirectory("pipeline")
        defer { dir.remove() }
        // The longest window the configuration allows: a slow run (ThreadSanitizer, a busy machine) stays inside it.
        let (pipeline, spool) = try make(dir, debounce: 3600)
        defer { pipeline.stop() }
        var outcomes: [String] = []
        for (raw, device) in [(Self.url, "a"), (Self.url, "a"), (Self.url, "b"), ("4006381333931", "a")] {
            switch accept(pipeline, read(raw, device: device)) {
            case .accepted(let scan)?: outcomes.append(scan.state.rawValue)
            case .debounced?: outcomes.append("debounced")
            case .refused(let reason)?: outcomes.append("refused: \(reason)")
            case nil: outcomes.append("no outcome within 10 s")
            }
        }
        #expect(outcomes == ["pending", "debounced", "pending", "unrecognized"])
        let tally = pipeline.currentTally
        #expect(tally.reads[Pipeline.Tally.Key(source: SourceKind("test"), outcome: .debounced)] == 1)
        #expect(try spool.list().count == 3)
    }

    @Test func theFixAtTheMomentOfTheReadIsInTheInput() throws {
        let dir = TemporaryDirectory("pipeline")
        defer { dir.remove() }
        let fix = LocationFix(latitude: 59.3293, longitude: 18.0686, accuracy: 8)
        let (pipeline, _) = try make(dir, fix: StaticFix(fix: fix))
        defer { pipeline.stop() }
        guard case .accepted(let scan)? = accept(pipeline, read(Self.url)),
            case .pending(let identifier, let input) = scan.verdict
        else {
            Issue.record("not accepted as pending")
            return
        }
        #expect(identifier == "4kyQCd5tMDjJVWJ")
        // docs/contracts.md, "resolveIdentifier input": the position with its accuracy and consent.
        let json = try JSONParser.parse(Array(input.utf8))
        let geo = json["scanMetadata"]?["geoLocation"]
        #expect(geo?["latitude"]?.doubleValue == 59.3293 && geo?["longitude"]?.doubleValue == 18.0686)
        #expect(geo?["accuracy"]?.doubleValue == 8 && geo?["consent"] == .bool(true))
    }

    @Test func readsSubmittedBeforeTheStopAreCommittedAndLaterOnesAreRefused() throws {
        let dir = TemporaryDirectory("pipeline")
        defer { dir.remove() }
        let committed = Mutex(0)
        let (pipeline, spool) = try make(dir) { scans in committed.withLock { $0 += scans.count } }
        for n in 0..<20 { pipeline.submit(read("https://s.plings.io/?t=q&i=B\(Self.base58(n))&p=1")) }
        pipeline.stop()
        #expect(committed.withLock { $0 } == 20)
        let counts = try spool.stats().counts
        #expect(counts[.pending] == 20, "\(counts)")
        let late = Monitor<String?>(nil)
        pipeline.submit(read(Self.url)) { outcome in
            if case .refused(let reason) = outcome { late.update { $0 = reason } }
        }
        #expect(late.withLock { $0 } == "the service is stopping")
    }
}
