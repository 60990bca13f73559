import Foundation

/// Where a read came from: a read source's kind (`nfc`, `hid`: each source module declares its own, as
/// `extension SourceKind { public static let nfc = SourceKind("nfc") }`), or `manual` for the CLI's `scan`. The
/// name is what the spool, the API's `source.kind` and the metrics' `source` label carry.
public struct SourceKind: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (a: SourceKind, b: SourceKind) -> Bool { a.rawValue < b.rawValue }

    /// A read given on the command line (`plings-bridge scan`).
    public static let manual = SourceKind("manual")
}

/// Raw bytes from a device, before the pipeline: an NDEF URL, a line typed by a scanner, or a CLI argument.
public struct Read: Sendable, Equatable {
    public var sourceKind: SourceKind
    /// The device's name: the operator's (`DeviceName`, from a rule's `name`), else the PC/SC reader name (NFC) or
    /// the scanner's stable name, or `cli` (manual).
    public var device: String
    /// Tag UID as lower-case hex, NFC only.
    public var uid: String?
    /// The URL or line exactly as read (may be empty).
    public var raw: String
    /// Wall-clock time of the read (card detected / line completed); becomes the scan's timestamp.
    public var time: Date
    /// When the source could not produce a URL, why (blank tag, no URI record). The read is kept unrecognized.
    public var noURLReason: String?
    /// The AIM symbology identifier (ISO/IEC 15424: `]Q1` QR Code, `]C1` GS1-128, ...) when the scanner gives one
    /// apart from the data (HID POS); kept in the spool and the MQTT payload, never sent to the API.
    public var symbology: String?
    /// What NXP's originality signature said of the tag (`nfc.checkOriginality`); nil when not checked.
    public var genuine: Originality?
    /// What `time` rests on: the boot, its own clock at the read, whether the wall clock was trusted (set by the
    /// pipeline when it takes the read; nil before).
    public var clock: ClockBasis?

    public init(
        sourceKind: SourceKind, device: String, uid: String? = nil, raw: String, time: Date,
        noURLReason: String? = nil, symbology: String? = nil, genuine: Originality? = nil, clock: ClockBasis? = nil
    ) {
        self.genuine = genuine
        self.clock = clock
        self.sourceKind = sourceKind
        self.device = device
        self.uid = uid
        self.raw = raw
        self.time = time
        self.noURLReason = noURLReason
        self.symbology = symbology
    }
}

/// The verdict of an originality check of a tag (NXP's signature over its UID, `nfc.checkOriginality`), as the
/// spool stores it: `true`, `false`, or `unknown` when the tag gave no signature.
public enum Originality: String, Sendable, Equatable {
    case genuine = "true"
    case notGenuine = "false"
    case unknown

    /// In JSON (`spool list/export`, MQTT, `test-read`): `true`, `false` or `"unknown"`.
    public var json: JSONValue {
        switch self {
        case .genuine: return .bool(true)
        case .notGenuine: return .bool(false)
        case .unknown: return .string("unknown")
        }
    }
}

/// A position to attach to a scan.
public struct LocationFix: Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    /// Horizontal error in metres, nil when unknown.
    public var accuracy: Double?

    public init(latitude: Double, longitude: Double, accuracy: Double? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.accuracy = accuracy
    }

    /// True when the coordinates are finite and on the globe; anything else is never sent.
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && abs(latitude) <= 90 && abs(longitude) <= 180
            && (accuracy.map { $0.isFinite && $0 >= 0 } ?? true)
    }
}

/// The seam through which the pipeline asks for the fix that is fresh *now*.
///
/// Implementations must answer from memory (a cached value), never by I/O: the call sits on the read path.
public protocol FixProvider: Sendable {
    func currentFix() -> LocationFix?
}

/// No location: scans carry no `geoLocation` (location disabled, or nothing configured).
public struct NoFixProvider: FixProvider {
    public init() {}
    public func currentFix() -> LocationFix? { nil }
}

/// A gate that does not move: the configured position, always fresh.
public struct FixedFixProvider: FixProvider {
    public let fix: LocationFix
    public init(fix: LocationFix) { self.fix = fix }
    public func currentFix() -> LocationFix? { fix }
}

/// The first provider that has a fresh fix wins (GPS first, then the fixed location).
public struct FirstFixProvider: FixProvider {
    public let providers: [any FixProvider]
    public init(_ providers: [any FixProvider]) { self.providers = providers }
    public func currentFix() -> LocationFix? {
        for provider in providers {
            if let fix = provider.currentFix() { return fix }
        }
        return nil
    }
}
