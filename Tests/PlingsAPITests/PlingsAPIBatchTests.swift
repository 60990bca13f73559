import BridgeCore
import BridgeTestSupport
import PlingsAPI
import Foundation
import Logging
import SinkKit
import Platform
import Spool
import Testing

/// A backlog drains several scans per request (docs/contracts.md, "Batched request"), against the real API
/// stand-in, which executes each batched request with graphql-core as any GraphQL server would.
@Suite(.serialized)
struct PlingsAPIBatchTests {
    struct Rig {
        let api: APIStandIn
        let dir: TemporaryDirectory
        let spool: Spool
        let recorded = Monitor(0)
        let logFile: String
        let logFD: Int32

        /// `perIdentifier` scans of each identifier, interleaved as a bench's day would leave them.
        init(identifiers: [String], perIdentifier: Int = 1) throws {
            api = try APIStandIn()
            dir = TemporaryDirectory("fwd-batch")
            spool = try Spool(path: dir.file("spool.sqlite"))
            logFile = dir.file("log")
            logFD = open(logFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            let builder = ScanBuilder(parser: PlingsURLParser())
            var t = Date().addingTimeInterval(-600)
            for n in 0..<perIdentifier {
                for identifier in identifiers {
                    t = t.addingTimeInterval(0.01)
                    let read = Read(
                        sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=\(identifier)&p=1.\(n)",
                        time: t)
                    try spool.insert([builder.build(read, fix: nil)])
                }
            }
        }

        func settings(batchSize: Int = 25) -> APISettings {
            APISettings(
                url: api.url, token: api.token, document: GraphQLRequestBody.defaultDocument, timeout: 5,
                concurrency: 2, batchSize: batchSize, allowInsecureHTTP: true, userAgent: "plings-bridge-test")
        }

        func forwarder(batchSize: Int = 25) throws -> QueuedSink<APISettings> {
            let recorded = self.recorded
            guard
                let sink = QueuedSink(
                    .api, settings: settings(batchSize: batchSize), spool: spool,
                    logger: Logger(minimum: .info, fd: logFD),
                    delivered: { recorded.update { $0 += 1 } })
            else { throw RigError("no HTTP client for the API sink") }
            return sink
        }

        func count(_ state: ScanState) -> Int { (try? spool.stats().counts[state]) ?? 0 }

        /// Waits (bounded) until no scan is pending, looking each time the forwarder recorded an outcome.
        func awaitDrained(timeout: Double) -> Bool {
            let deadline = MonotonicClock.deadline(after: timeout)
            var seen = 0
            while count(.pending) > 0 {
                let last = seen
                guard recorded.wait(until: deadline, for: { $0 > last }) else { return count(.pending) == 0 }
                seen = recorded.withLock { $0 }
            }
            return true
        }

        var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

        func teardown() {
            close(logFD)
            api.stop()
            dir.remove()
        }
    }

    /// 12 identifiers, 4 scans each: requests carry several identifiers' heads, never two scans of one
    /// identifier; per identifier the API executes them in capture order; one field's error concerns only its
    /// scan (a validation code: dead; a server error: retried), the others are delivered.
    @Test func aBacklogGoesInBatchesAndEachFieldIsAnsweredOnItsOwn() throws {
        let identifiers = "abcdefghijkm".map { "Bx\($0)" }  // base58: no 0, O, I or l
        let rig = try Rig(identifiers: identifiers, perIdentifier: 4)
        defer { rig.teardown() }
        try rig.api.setFieldFault(identifier: "Bxc", code: "BAD_USER_INPUT", count: 1)
        try rig.api.setFieldFault(identifier: "Bxg", code: "INTERNAL_SERVER_ERROR", count: 1)
        let forwarder = try rig.forwarder()
        forwarder.start()
        defer { forwarder.stop(timeout: 3) }
        #expect(rig.awaitDrained(timeout: 30))
        #expect(rig.count(.delivered) == 47 && rig.count(.dead) == 1, "\(rig.log)")
        let requests = try rig.api.requests()
        let sizes = requests.map { ($0["inputs"] as? [Any])?.count ?? 0 }
        #expect(sizes.max() ?? 0 > 1 && sizes.max() ?? 0 <= 12, "\(sizes)")
        #expect(requests.count < 48 / 2, "\(requests.count) requests for 48 scans")
        for request in requests {
            let ids = (request["inputs"] as? [[String: Any]] ?? []).compactMap { $0["identifier"] as? String }
            #expect(Set(ids).count == ids.count, "two scans of one identifier in one request: \(ids)")
        }
        // Capture order per identifier, as executed (the dead scan excepted).
        var seen: [String: [String]] = [:]
        for input in try rig.api.deliveredInputs() {
            seen[input["identifier"] as? String ?? "", default: []].append(
                (input["scanMetadata"] as? [String: Any])?["timestamp"] as? String ?? "")
        }
        #expect(seen.values.allSatisfy { $0 == $0.sorted() })
        #expect(seen.values.map(\.count).reduce(0, +) == 47)
        let stats = try rig.api.stats()
        #expect(stats["identifierOverlaps"] as? Int == 0 && stats["orderViolations"] as? Int == 0)
        #expect(stats["duplicateDeliveries"] as? Int == 0)
        // The dead scan keeps the answer a single request would have got.
        let dead = try #require(try rig.spool.list(state: .dead).first)
        #expect(dead.lastError == "GraphQL error: field error (injected, BAD_USER_INPUT) (BAD_USER_INPUT)")
        let response = try JSONParser.parse(dead.response ?? "")
        #expect(response["data"]?["resolveIdentifier"] == .null)
        guard case .array(let errors)? = response["errors"] else {
            Issue.record("no errors kept: \(dead.response ?? "")")
            return
        }
        #expect(errors.first?["path"] == .array([.string("resolveIdentifier")]))
        #expect(!rig.log.contains(rig.api.token))
    }

    /// A request that got no answer (the connection dropped) is sent again with the same scans, in the same
    /// order, under the same Idempotency-Key.
    @Test func aRequestWithoutAnAnswerIsRepeatedAsItWas() throws {
        let rig = try Rig(identifiers: ["Dr1", "Dr2", "Dr3", "Dr4", "Dr5"])
        defer { rig.teardown() }
        try rig.api.setMode("drop", ["count": 1])
        let forwarder = try rig.forwarder()
        forwarder.start()
        defer { forwarder.stop(timeout: 3) }
        #expect(rig.awaitDrained(timeout: 30))
        #expect(rig.count(.delivered) == 5)
        let requests = try rig.api.requests()
        #expect(requests.count == 2)
        func members(_ request: [String: Any]) -> [String] {
            (request["inputs"] as? [[String: Any]] ?? []).compactMap { $0["identifier"] as? String }
        }
        func key(_ request: [String: Any]) -> String? {
            (request["headers"] as? [String: Any])?["idempotency-key"] as? String
        }
        #expect(requests.first.map(members) == ["Dr1", "Dr2", "Dr3", "Dr4", "Dr5"])
        #expect(
            requests.count == 2 && members(requests[0]) == members(requests[1]) && key(requests[0]) == key(requests[1]))
        #expect(requests.first.flatMap(key)?.count == 36)
    }

    /// An API that refuses batched requests (an alias limit, HTTP 400) gets one scan per request from then on,
    /// told once; nothing is dead or lost. A reload tries batches again.
    @Test func anAPIThatRefusesBatchesGetsOneScanPerRequest() throws {
        let rig = try Rig(identifiers: (1...6).map { "Rf\($0)" })
        defer { rig.teardown() }
        try rig.api.setAliasLimit(1)
        let forwarder = try rig.forwarder()
        forwarder.start()
        defer { forwarder.stop(timeout: 3) }
        #expect(rig.awaitDrained(timeout: 30))
        #expect(rig.count(.delivered) == 6 && rig.count(.dead) == 0)
        let requests = try rig.api.requests()
        #expect(requests.filter { $0["status"] as? Int == 400 }.count == 1)
        #expect(requests.filter { $0["delivered"] as? Bool == true }.count == 6)
        #expect(rig.log.components(separatedBy: "the API refused a batched request").count - 1 == 1)
        #expect(forwarder.currentHealth == .healthy)
        // The API lifts its limit and the configuration is reloaded: batches again.
        try rig.api.setAliasLimit(nil)
        #expect(forwarder.update(rig.settings()))
        let builder = ScanBuilder(parser: PlingsURLParser())
        try rig.spool.insert(
            (1...4).map {
                builder.build(
                    Read(sourceKind: .manual, device: "t", raw: "https://s.plings.io/?t=q&i=Rg\($0)&p=1", time: Date()),
                    fix: nil)
            })
        forwarder.wake()
        #expect(rig.awaitDrained(timeout: 30))
        #expect((try rig.api.stats()["batchedRequests"] as? Int ?? 0) >= 1)
    }
}
