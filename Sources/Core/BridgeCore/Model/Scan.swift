import Foundation

/// The lifecycle state of a spooled scan (docs/contracts.md, "Spool record").
/// A scan's state over every sink that queued it (docs/contracts.md, "Spool record"; issue 56).
public enum ScanState: String, Sendable, CaseIterable {
    /// An enabled sink still owes it.
    case pending
    /// Every sink that queued it took it.
    case delivered
    /// A sink refused it for good (none still owes it); `spool retry` revives it.
    case dead
    /// Not a Plings URL; kept for inspection, never sent to the API (a webhook gets it).
    case unrecognized
    /// No enabled sink queued it: the spool is its destination. Never pending, never pruned by the retention.
    case kept
}

/// A scan ready to be committed to the spool: the read plus what the pipeline decided about it.
public struct NewScan: Sendable, Equatable {
    /// What the pipeline decided: a scan to deliver, or a read kept for inspection and never sent.
    public enum Verdict: Sendable, Equatable {
        /// A Plings identifier with its resolveIdentifier input JSON (docs/contracts.md, "resolveIdentifier input").
        case pending(identifier: String, input: String)
        /// Not a Plings URL (or no URL at all), and why.
        case unrecognized(reason: String)
    }

    /// UUID, lower case; also the delivery's `Idempotency-Key`.
    public var id: String
    public var read: Read
    public var verdict: Verdict

    public init(id: String, read: Read, verdict: Verdict) {
        self.id = id
        self.read = read
        self.verdict = verdict
    }

    /// The spool state the scan is committed in.
    public var state: ScanState {
        if case .pending = verdict { return .pending }
        return .unrecognized
    }

    /// The identifier, for per-identifier ordering; nil when unrecognized.
    public var identifier: String? {
        if case .pending(let identifier, _) = verdict { return identifier }
        return nil
    }

    /// The resolveIdentifier input JSON; nil when unrecognized.
    public var inputJSON: String? {
        if case .pending(_, let input) = verdict { return input }
        return nil
    }

    /// Why the read is unrecognized; nil when pending.
    public var reason: String? {
        if case .unrecognized(let reason) = verdict { return reason }
        return nil
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
            return NewScan(id: id, read: read, verdict: .unrecognized(reason: why))
        }
        switch parser.parse(read.raw) {
        case .success(let identifier):
            let input = ResolveIdentifierInput.build(identifier, time: read.time, fix: fix)
            return NewScan(
                id: id, read: read, verdict: .pending(identifier: identifier.identifier, input: input.encoded()))
        case .failure(let reason):
            return NewScan(id: id, read: read, verdict: .unrecognized(reason: reason.description))
        }
    }
}
