/// What a completed tag read found. Completed includes "no URL here": see `noURLReason`.
public struct TagReadResult: Sendable, Equatable {
    /// The tag UID from `FF CA 00 00 00`; nil when the reader would not give it (not fatal).
    public var uid: [UInt8]?
    /// The tag kind the read used.
    public var kind: TagKind
    /// The raw NDEF message: nil when the tag holds none (unformatted, no NDEF TLV, unsupported card),
    /// empty when it holds an empty one (TLV length 0, NLEN 0).
    public var ndef: [UInt8]?
    /// The parsed records of `ndef`; empty when there is no message.
    public var records: [NDEFRecord]
    /// Every URI in the message, in order, smart poster URIs included (`NDEFURI.uris(in:)`). The caller
    /// picks the first one it accepts.
    public var uris: [String]
    /// Why there is no URL, when `uris` is empty (e.g. "empty NDEF message"); nil when there are URIs.
    public var noURLReason: String?
    /// How many APDUs the read sent.
    public var apduCount: Int
    /// Whether the read went through NTAG FAST_READ.
    public var fastRead: FastReadUse = .notTried
    /// The NTAG's originality signature (READ_SIG, 32 bytes) when it was asked for and given.
    public var signature: [UInt8]?
    /// The tag's answer to GET_VERSION (8 bytes), asked with the signature; nil when not asked or not answered.
    public var version: [UInt8]?

    /// The NXP product the tag says it is (GET_VERSION), e.g. `NTAG213`; nil when it was not asked or gave none.
    public var product: NXPProduct? { NXPProduct.identify(version: version) }

    /// Creates a result.
    public init(
        uid: [UInt8]?, kind: TagKind, ndef: [UInt8]?, records: [NDEFRecord], uris: [String],
        noURLReason: String?, apduCount: Int
    ) {
        self.uid = uid
        self.kind = kind
        self.ndef = ndef
        self.records = records
        self.uris = uris
        self.noURLReason = noURLReason
        self.apduCount = apduCount
    }

    /// The first URI, if any.
    public var uri: String? { uris.first }

    /// The UID as upper-case hex without separators (`04A1B2C3D4E580`), or nil.
    public var uidHex: String? {
        uid.map { NFCHex.bytes($0, separator: "") }
    }
}
