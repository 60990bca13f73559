import Foundation
import Testing

@testable import BridgeCore

/// docs/contracts.md, "resolveIdentifier input": the exact input JSON, golden.
struct ResolveIdentifierInputTests {
    /// 2026-06-14T08:00:00.123Z
    let time = Date(timeIntervalSince1970: 1_781_424_000.123_9)
    let id = PlingsIdentifier(type: .nfc, identifier: "4kyQ", path: "4.2.3.3.6")

    @Test func withoutClassPointerWithoutFix() {
        let json = ResolveIdentifierInput.build(id, time: time, fix: nil).encoded()
        #expect(
            json
                == #"{"type":"n","identifier":"4kyQ","path":"4.2.3.3.6","scanMetadata":{"timestamp":"2026-06-14T08:00:00.123Z"}}"#
        )
    }

    @Test func withClassPointerAndFix() {
        var withCP = id
        withCP.classPointer = "Kx7"
        let fix = LocationFix(latitude: 59.3293, longitude: 18.0686, accuracy: 8)
        let json = ResolveIdentifierInput.build(withCP, time: time, fix: fix).encoded()
        #expect(
            json
                == #"{"type":"n","identifier":"4kyQ","path":"4.2.3.3.6","classPointer":"Kx7","scanMetadata":{"timestamp":"2026-06-14T08:00:00.123Z","geoLocation":{"latitude":59.3293,"longitude":18.0686,"accuracy":8.0,"consent":true}}}"#
        )
    }

    @Test func fixWithoutAccuracyOmitsIt() {
        let fix = LocationFix(latitude: -33.5, longitude: 151.25)
        let json = ResolveIdentifierInput.build(id, time: time, fix: fix).encoded()
        #expect(json.hasSuffix(#""geoLocation":{"latitude":-33.5,"longitude":151.25,"consent":true}}}"#))
    }

    @Test func invalidFixIsNeverSent() {
        for fix in [
            LocationFix(latitude: .nan, longitude: 1), LocationFix(latitude: 91, longitude: 1),
            LocationFix(latitude: 1, longitude: -181), LocationFix(latitude: 1, longitude: 1, accuracy: -1),
        ] {
            #expect(!ResolveIdentifierInput.build(id, time: time, fix: fix).encoded().contains("geoLocation"))
        }
    }

    @Test func requestBodyMatchesDesign() {
        let input = ResolveIdentifierInput.build(id, time: time, fix: nil)
        let viaValue = GraphQLRequestBody.build(document: GraphQLRequestBody.defaultDocument, input: input).encoded()
        let viaText = GraphQLRequestBody.build(document: GraphQLRequestBody.defaultDocument, inputJSON: input.encoded())
        #expect(viaValue == viaText)
        #expect(
            viaText
                == #"{"query":"mutation ResolveIdentifier($input: ResolveIdentifierInput!) { resolveIdentifier(input: $input) { __typename } }","variables":{"input":{"type":"n","identifier":"4kyQ","path":"4.2.3.3.6","scanMetadata":{"timestamp":"2026-06-14T08:00:00.123Z"}}},"operationName":"ResolveIdentifier"}"#
        )
    }

    @Test func scanBuilderKeepsUnrecognizedReadsWithReason() {
        let builder = ScanBuilder(parser: PlingsURLParser())
        let read = Read(sourceKind: SourceKind("hid"), device: "bench-1", raw: "5901234123457", time: time)
        let scan = builder.build(read, fix: nil, id: "x")
        #expect(scan.state == .unrecognized)
        #expect(scan.inputJSON == nil)
        #expect(scan.reason == "not a URL")
        let blank = Read(
            sourceKind: SourceKind("nfc"), device: "r", uid: "04a1", raw: "", time: time, noURLReason: "blank tag")
        #expect(builder.build(blank, fix: nil).reason == "blank tag")
    }

    @Test func scanBuilderFixesTimestampAtReadTime() {
        let builder = ScanBuilder(parser: PlingsURLParser())
        let read = Read(sourceKind: .manual, device: "cli", raw: "https://s.plings.io/?t=q&i=A&p=1", time: time)
        let scan = builder.build(read, fix: nil)
        #expect(scan.state == .pending)
        #expect(scan.identifier == "A")
        #expect(scan.inputJSON?.contains("2026-06-14T08:00:00.123Z") == true)
        #expect(scan.id.count == 36 && scan.id == scan.id.lowercased())
    }
}

struct TimestampTests {
    @Test func formatsUTCWithMillisecondsTruncated() {
        #expect(Timestamp.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.format(Date(timeIntervalSince1970: 951_782_400.9999)) == "2000-02-29T00:00:00.999Z")
        #expect(Timestamp.format(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
        #expect(Timestamp.format(Date(timeIntervalSince1970: 4_102_444_799.001)) == "2099-12-31T23:59:59.001Z")
    }

    @Test func roundTrips() {
        for seconds in stride(from: -86_400.0 * 800, to: 86_400.0 * 40_000, by: 86_400.0 * 37.3 + 0.123) {
            let date = Date(timeIntervalSince1970: (seconds * 1000).rounded(.down) / 1000)
            let text = Timestamp.format(date)
            #expect(Timestamp.parse(text).map(Timestamp.format) == text)
        }
    }

    @Test func parseRejectsGarbage() {
        for text in [
            "", "2026-13-01T00:00:00Z", "2026-06-14 08:00:00Z", "2026-06-14T08:00:00.Z", "2026-06-14T08:00:00+01:00",
        ] {
            #expect(Timestamp.parse(text) == nil, "\(text)")
        }
        #expect(Timestamp.parse("2026-06-14T08:00:00Z") != nil)
    }
}

struct DebouncerTests {
    @Test func samePayloadSameDeviceInsideWindowIsOneRead() {
        var d = Debouncer(window: 2)
        let results = [
            d.accept(device: "a", payload: "x", now: 10),
            d.accept(device: "a", payload: "x", now: 11.9),
            d.accept(device: "b", payload: "x", now: 11.9),
            d.accept(device: "a", payload: "y", now: 11.9),
            d.accept(device: "a", payload: "x", now: 12.0),
        ]
        #expect(results == [true, false, true, true, true])
    }

    @Test func zeroWindowDisables() {
        var d = Debouncer(window: 0)
        let results = [d.accept(device: "a", payload: "x", now: 1), d.accept(device: "a", payload: "x", now: 1)]
        #expect(results == [true, true])
    }

    @Test func memoryIsBounded() {
        var d = Debouncer(window: 1)
        for n in 0..<10_000 { _ = d.accept(device: "a", payload: "p\(n)", now: Double(n) * 0.01) }
        #expect(d.trackedCount < 400)
    }
}
