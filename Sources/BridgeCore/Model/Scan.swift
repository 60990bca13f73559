import Foundation

/// The lifecycle state of a spooled scan (docs/contracts.md, "Spool record").
public enum ScanState: String, Sendable, CaseIterable {
    /// Waiting for delivery (or for an API to be configured).
    case pending
    /// The API accepted it.
    case delivered
    /// The API refused it permanently; `spool retry` revives it.
    case dead
    /// Not a Plings URL; kept for inspection, never sent.
    case unrecognized
}

/// A scan ready to be committed to the spool: the read plus what the pipeline decided about it.
public struct NewScan: Sendable, Equatable {
    /// UUID, lower case; also the delivery's `Idempotency-Key`.
    public var id: String
    public var read: Read
    public var state: ScanState
    /// The identifier, for per-identifier ordering; nil when unrecognized.
    public var identifier: String?
    /// The resolveIdentifier input JSON (docs/contracts.md, "resolveIdentifier input"); nil when unrecognized.
    public var inputJSON: String?
    /// Why the read is unrecognized; nil otherwise.
    public var reason: String?

    public init(
        id: String, read: Read, state: ScanState, identifier: String?, inputJSON: String?, reason: String?
    ) {
        self.id = id
        self.read = read
        self.state = state
        self.identifier = identifier
        self.inputJSON = inputJSON
        self.reason = reason
    }
}

/// Turns a read into a scan: parse the URL, couple the fix, build the input. Pure, so it is unit-tested.
public struct ScanBuilder: Sendable {
    public let parser: PlingsURLParser

    public init(parser: PlingsURLParser) { self.parser = parser }

    /// - Parameters:
    ///   - fix: the fix fresh at the moment of the read (nil when none or location is disabled).
    ///   - id: the scan id; a new random UUID unless given (tests).
    public func build(_ read: Read, fix: LocationFix?, id: String = UUID().uuidString.lowercased()) -> NewScan {
        if let why = read.noURLReason {
            return NewScan(id: id, read: read, state: .unrecognized, identifier: nil, inputJSON: nil, reason: why)
        }
        switch parser.parse(read.raw) {
        case .success(let identifier):
            let input = ResolveIdentifierInput.build(identifier, time: read.time, fix: fix)
            return NewScan(
                id: id, read: read, state: .pending, identifier: identifier.identifier, inputJSON: input.encoded(),
                reason: nil)
        case .failure(let reason):
            return NewScan(
                id: id, read: read, state: .unrecognized, identifier: nil, inputJSON: nil, reason: reason.description)
        }
    }
}
