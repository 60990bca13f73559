import Foundation

/// A scan as stored in the spool (docs/contracts.md, "Spool record"), for inspection and delivery.
public struct ScanRecord: Sendable, Equatable {
    public var id: String
    public var createdAt: Date
    public var state: ScanState
    public var sourceKind: SourceKind
    public var device: String
    public var uid: String?
    public var raw: String
    /// The resolveIdentifier input JSON text; nil when unrecognized.
    public var inputJSON: String?
    public var identifier: String?
    public var attempts: Int
    public var lastError: String?
    public var nextAttemptAt: Date?
    public var deliveredAt: Date?
    public var response: String?
    /// The AIM symbology identifier the scanner gave (HID POS), nil when none.
    public var symbology: String?
    /// The originality check's verdict (`nfc.checkOriginality`), nil when the tag was not checked.
    public var genuine: Originality?
    /// What `createdAt` rests on (schema 11); nil for a read committed before it was recorded.
    public var clock: ClockBasis?

    public init(
        id: String, createdAt: Date, state: ScanState, sourceKind: SourceKind, device: String, uid: String?,
        raw: String, inputJSON: String?, identifier: String?, attempts: Int, lastError: String?,
        nextAttemptAt: Date?, deliveredAt: Date?, response: String?, symbology: String? = nil,
        genuine: Originality? = nil, clock: ClockBasis? = nil
    ) {
        self.genuine = genuine
        self.clock = clock
        self.id = id
        self.createdAt = createdAt
        self.state = state
        self.sourceKind = sourceKind
        self.device = device
        self.uid = uid
        self.raw = raw
        self.inputJSON = inputJSON
        self.identifier = identifier
        self.attempts = attempts
        self.lastError = lastError
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
        self.response = response
        self.symbology = symbology
    }

    /// The position the scan carries (its input's `scanMetadata.geoLocation`); nil when it has none.
    public var position: LocationFix? {
        guard let text = inputJSON, let input = try? JSONParser.parse(text),
            let geo = input["scanMetadata"]?["geoLocation"], let lat = geo["latitude"]?.doubleValue,
            let lon = geo["longitude"]?.doubleValue
        else { return nil }
        return LocationFix(latitude: lat, longitude: lon, accuracy: geo["accuracy"]?.doubleValue)
    }

    /// The `spool list --json` object (docs/contracts.md, "Spool record"; field names fixed; absent values null):
    /// the read's fields (`readJSON`) and its delivery state.
    public func json() -> JSONValue {
        func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        var fields = readFields()
        fields.insert(("state", .string(state.rawValue)), at: 1)
        fields += [
            ("attempts", .integer(attempts)),
            ("lastError", optional(lastError)),
            ("createdAt", .string(Timestamp.format(createdAt))),
            ("deliveredAt", deliveredAt.map { .string(Timestamp.format($0)) } ?? .null),
            ("nextAttemptAt", nextAttemptAt.map { .string(Timestamp.format($0)) } ?? .null),
            ("response", optional(response)),
            ("clock", clock?.json ?? .null),
        ]
        return .object(fields)
    }

    /// The read alone, without any delivery state (docs/contracts.md, "Webhook request"): what a sink sends. It
    /// never changes once the scan is committed, so a retry carries the same bytes as the first try (the same
    /// `Idempotency-Key`, the same body, the same signature). An unrecognized read has a null `input`.
    public func readJSON() -> JSONValue {
        .object(readFields() + [("createdAt", .string(Timestamp.format(createdAt))), ("clock", clock?.json ?? .null)])
    }

    /// The fields the read fixed at its commit, in the record's order up to `input`.
    private func readFields() -> [(String, JSONValue)] {
        func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        // The input is stored as JSON text we wrote; if it ever fails to parse (a hand-edited row), show it as a
        // string rather than hiding it.
        let input: JSONValue = inputJSON.map { (try? JSONParser.parse($0)) ?? .string($0) } ?? .null
        return [
            ("id", .string(id)),
            (
                "source",
                .object([("kind", .string(sourceKind.rawValue)), ("device", .string(device)), ("uid", optional(uid))])
            ),
            ("raw", .string(raw)),
            ("symbology", optional(symbology)),
            ("genuine", genuine?.json ?? .null),
            ("input", input),
        ]
    }
}

/// Counts and health of the spool (`spool stats`).
public struct SpoolStats: Sendable, Equatable {
    public var counts: [ScanState: Int]
    /// Seconds since the oldest pending scan was captured; nil when nothing is pending.
    public var oldestPendingAge: Double?
    /// The most recent delivery error recorded on any pending or dead scan.
    public var lastError: String?
    public var schemaVersion: Int

    public init(counts: [ScanState: Int], oldestPendingAge: Double?, lastError: String?, schemaVersion: Int) {
        self.counts = counts
        self.oldestPendingAge = oldestPendingAge
        self.lastError = lastError
        self.schemaVersion = schemaVersion
    }

    public func json() -> JSONValue {
        .object([
            ("counts", .object(ScanState.allCases.map { ($0.rawValue, .integer(counts[$0] ?? 0)) })),
            ("oldestPendingAge", oldestPendingAge.map { .number(($0 * 1000).rounded() / 1000) } ?? .null),
            ("lastError", lastError.map(JSONValue.string) ?? .null),
            ("schemaVersion", .integer(schemaVersion)),
        ])
    }
}
