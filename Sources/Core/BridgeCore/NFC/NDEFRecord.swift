/// One NDEF record (NFC Forum NDEF 1.0), without its framing flags.
///
/// MB, ME, SR and IL are framing: they belong to the message, not to the record.
/// `NDEFMessage.encode(_:)` recomputes them and `NDEFParser` checks them. Chunked records (CF) are
/// refused by the parser, so a record here is always complete.
public struct NDEFRecord: Sendable, Equatable, Hashable {
    /// Type Name Format, 0...7. See `NDEFRecord.TNF` for the values.
    public var tnf: UInt8
    /// The record type, interpreted according to `tnf` (for well-known records e.g. `U`, `T`, `Sp`).
    public var type: [UInt8]
    /// The record identifier (IL flag set when non-empty); usually empty.
    public var id: [UInt8]
    /// The record payload.
    public var payload: [UInt8]

    /// Creates a record. `tnf` is masked to its 3 bits so a record always encodes as it reads back.
    public init(tnf: UInt8, type: [UInt8], id: [UInt8] = [], payload: [UInt8]) {
        self.tnf = tnf & 0x07
        self.type = type
        self.id = id
        self.payload = payload
    }

    /// The Type Name Format values of NDEF 1.0.
    public enum TNF {
        /// Empty record: type, id and payload are all empty.
        public static let empty: UInt8 = 0x00
        /// NFC Forum well-known type (RTD): `U` URI, `T` text, `Sp` smart poster, ...
        public static let wellKnown: UInt8 = 0x01
        /// Media type (RFC 2046), e.g. `text/plain`.
        public static let mediaType: UInt8 = 0x02
        /// Absolute URI (RFC 3986): the type field *is* the URI.
        public static let absoluteURI: UInt8 = 0x03
        /// NFC Forum external type, e.g. `android.com:pkg`.
        public static let external: UInt8 = 0x04
        /// Unknown payload type.
        public static let unknown: UInt8 = 0x05
        /// Unchanged: only valid for middle and last chunks of a chunked record.
        public static let unchanged: UInt8 = 0x06
        /// Reserved; readers treat it as unknown.
        public static let reserved: UInt8 = 0x07
    }

    /// Well-known record type names used here.
    public enum WellKnownType {
        /// `U`: URI record.
        public static let uri: [UInt8] = [0x55]
        /// `T`: text record.
        public static let text: [UInt8] = [0x54]
        /// `Sp`: smart poster record (its payload is itself an NDEF message).
        public static let smartPoster: [UInt8] = [0x53, 0x70]
    }
}

// MARK: - Builders (tests, rigs, tools)

extension NDEFRecord {
    /// A well-known URI record (`U`) for `uri`, abbreviated with the longest matching RTD URI prefix.
    public static func uri(_ uri: String) -> NDEFRecord {
        NDEFRecord(tnf: TNF.wellKnown, type: WellKnownType.uri, payload: NDEFURI.encodePayload(uri))
    }

    /// An absolute-URI record (TNF 3): the URI is the record type, the payload is empty.
    public static func absoluteURI(_ uri: String) -> NDEFRecord {
        NDEFRecord(tnf: TNF.absoluteURI, type: Array(uri.utf8), payload: [])
    }

    /// A well-known text record (`T`), UTF-8, with an IANA language code (at most 63 bytes, longer is cut).
    public static func text(_ text: String, language: String = "en") -> NDEFRecord {
        let lang = Array(language.utf8.prefix(63))
        // Status byte: bit 7 = 0 (UTF-8), bit 6 reserved, bits 5...0 = language code length.
        let payload = [UInt8(lang.count)] + lang + Array(text.utf8)
        return NDEFRecord(tnf: TNF.wellKnown, type: WellKnownType.text, payload: payload)
    }

    /// A smart poster (`Sp`) holding a URI record and, when given, a title text record.
    public static func smartPoster(uri: String, title: String? = nil, language: String = "en") -> NDEFRecord {
        var inner = [NDEFRecord.uri(uri)]
        if let title {
            inner.append(.text(title, language: language))
        }
        return smartPoster(records: inner)
    }

    /// A smart poster (`Sp`) whose payload is the NDEF message made of `records`.
    public static func smartPoster(records: [NDEFRecord]) -> NDEFRecord {
        NDEFRecord(tnf: TNF.wellKnown, type: WellKnownType.smartPoster, payload: NDEFMessage.encode(records))
    }
}
