/// A family of PC/SC readers and what the bridge does with it beyond the standard PC/SC Part 3 reads: how it
/// gives feedback (beep and LED by outcome), how it reads a whole NTAG in one or two exchanges, and how its
/// detect beep is silenced.
///
/// Known families are recognised by their PC/SC reader name (`recognize(readerName:)`); `nfc.profiles` can
/// assign any profile to a reader by a substring of its name (first rule wins), which is also how the virtual
/// readers of the test rig get one. `plain` means: no feedback, no fast read, nothing but READ BINARY.
public enum ReaderProfile: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// ACS ACR122U (PN533): LED/buzzer pseudo-APDU `FF 00 40`, detect beep `FF 00 52`, PN533 InCommunicateThru.
    case acr122u
    /// ACS ACR1252U, ACR1255U, ACM1252U: escape commands `E0 00 00 28/29/21` through `SCardControl`, PC/SC
    /// Part 3 transparent session.
    case acr1252u
    /// HID Omnikey 5022/5422: PC/SC Part 3 transparent session; ISO 15693 (Type 5) through READ BINARY; no
    /// documented feedback command used.
    case omnikey
    /// ACS ACR1552U: ISO 15693 (Type 5) through READ BINARY; Type 2 by READ BINARY; no feedback command used.
    case acr1552u
    /// Identiv uTrust: PC/SC Part 3 transparent session; no documented feedback command used.
    case identiv
    /// Any other reader: READ BINARY only, no feedback.
    case plain

    public var description: String { rawValue }

    /// How the profile gives feedback, if at all.
    public enum Feedback: String, Sendable, Equatable {
        /// ACR122U pseudo-APDU `FF 00 40 P2 04 T1 T2 N B` through `SCardTransmit` (needs the tag present).
        case ledBuzzerAPDU
        /// ACR1252U family escapes `E0 00 00 29 01 ss` (LED) and `E0 00 00 28 01 dd` (buzzer) through
        /// `SCardControl` (works without a tag; needs escapes enabled in the driver).
        case escape
    }

    /// How the profile reads a page range in one exchange, if at all.
    public enum FastRead: String, Sendable, Equatable {
        /// PN533 InCommunicateThru wrapped in the ACR122U direct-transmit pseudo-APDU `FF 00 00 00 Lc D4 42 ..`.
        case inCommunicateThru
        /// PC/SC Part 3 transparent session: `FF C2 00 00 02 81 00`, `FF C2 00 01 .. 95 ..`, `FF C2 00 00 02 82 00`.
        case transparentSession
    }

    /// The feedback method, nil for none.
    public var feedback: Feedback? {
        switch self {
        case .acr122u: return .ledBuzzerAPDU
        case .acr1252u: return .escape
        case .omnikey, .acr1552u, .identiv, .plain: return nil
        }
    }

    /// Whether the reader reads ISO 15693 tags (NFC Forum Type 5): the families whose manuals document it. The
    /// PN53x in an ACR122U or ACR1252U does not speak ISO 15693 at all.
    public var readsISO15693: Bool { self == .omnikey || self == .acr1552u }

    /// What a read of an ISO 15693 tag on any other reader answers, and `doctor` says of it.
    public static let cannotReadISO15693 =
        "this reader cannot read ISO 15693 (Type 5 needs a reader with the omnikey or acr1552u profile; nfc.profiles "
        + "assigns one)"

    /// The fast-read method, nil for none.
    public var fastRead: FastRead? {
        switch self {
        case .acr122u: return .inCommunicateThru
        case .acr1252u, .omnikey, .identiv: return .transparentSession
        case .acr1552u, .plain: return nil
        }
    }

    /// Whether the detect beep can be silenced (`FF 00 52 00 00`, or the ACR1252U behaviour byte).
    public var canSilenceDetectBeep: Bool { self == .acr122u || self == .acr1252u }

    /// What the profile supports, for `readers` and `test-read`: "feedback: LED/buzzer pseudo-APDU; fast read:
    /// PN533 InCommunicateThru", or "no feedback, no fast read".
    public var capabilities: String {
        let feedbackText: String
        switch feedback {
        case .ledBuzzerAPDU: feedbackText = "feedback: LED/buzzer pseudo-APDU"
        case .escape: feedbackText = "feedback: escape commands (SCardControl)"
        case nil: feedbackText = "no feedback"
        }
        let fastText: String
        switch fastRead {
        case .inCommunicateThru: fastText = "fast read: PN533 InCommunicateThru"
        case .transparentSession: fastText = "fast read: PC/SC Part 3 transparent session"
        case nil: fastText = "no fast read"
        }
        let text = feedback == nil && fastRead == nil ? "\(feedbackText), \(fastText)" : "\(feedbackText); \(fastText)"
        return readsISO15693 ? text + "; ISO 15693" : text
    }

    /// The profile a reader name implies, without configuration: `plain` for an unknown reader.
    ///
    /// pcsc-lite names readers `<USB product name> <interface> <slot>`; ACS readers appear as "ACS ACR122U PICC
    /// Interface 00 00", "ACS ACR1252 1S CL Reader [ACR1252 1S CL Reader(1)] 00 00", HID ones as
    /// "ACS ACR1552 1S CL Reader PICC 00 00", "HID Global OMNIKEY 5422 Smartcard Reader [OMNIKEY 5422CL Smartcard Reader] 01 00", Identiv ones as
    /// "Identiv uTrust 3700 F Contactless Reader 00 00".
    public static func recognize(readerName: String) -> ReaderProfile {
        let name = readerName.uppercased()
        if name.contains("ACR122") { return .acr122u }
        if name.contains("ACR1252") || name.contains("ACR1255") || name.contains("ACM1252") { return .acr1252u }
        if name.contains("ACR1552") { return .acr1552u }
        if name.contains("OMNIKEY") && (name.contains("5022") || name.contains("5422")) { return .omnikey }
        if name.contains("IDENTIV") && name.contains("UTRUST") { return .identiv }
        return .plain
    }

    /// The profile for `readerName`: the first `rules` entry whose `reader` is a substring of the name, else
    /// `recognize(readerName:)`.
    public static func resolve(readerName: String, rules: [Rule]) -> ReaderProfile {
        rules.first { readerName.contains($0.reader) }?.profile ?? recognize(readerName: readerName)
    }

    /// One `nfc.profiles` entry.
    public struct Rule: Sendable, Equatable {
        /// A substring of the PC/SC reader name.
        public var reader: String
        public var profile: ReaderProfile

        public init(reader: String, profile: ReaderProfile) {
            self.reader = reader
            self.profile = profile
        }
    }
}
