/// Limits and knobs for one tag read.
public struct TagReadOptions: Sendable, Equatable {
    /// The most APDUs one read may send before giving up with `tooManyCommands`. The default covers the
    /// largest Type 2 area (2040 bytes) on a reader that returns 4 bytes per read (512 APDUs) and a
    /// Type 4 message of over 30 KB at MLe 59; a Plings tag needs 5 to 8.
    public var maxAPDUs: Int
    /// Upper bound on Le for Type 4 READ BINARY (further bounded by the tag's MLe and by 255).
    public var maxType4ReadLength: Int
    /// Whether to report the tag's UID: the reader's GET UID (`FF CA 00 00 00`) first, or, for a Type 2 tag read
    /// with FAST_READ, pages 0-2 of the first FAST_READ.
    public var readUID: Bool
    /// The pass-through to read Type 2 tags with NTAG FAST_READ, falling back to READ BINARY; nil: READ BINARY.
    public var fastRead: ReaderProfile.FastRead?
    /// On the fast path, also ask the tag for its originality signature (READ_SIG; one more exchange).
    public var readSignature = false
    /// Whether the reader speaks ISO 15693 (its profile says so): Type 5 tags are read only then; on any other
    /// reader the read ends, without a URL, with "this reader cannot read ISO 15693".
    public var readsISO15693 = false

    /// Creates options; the defaults suit every reader tested so far.
    public init(
        maxAPDUs: Int = 600, maxType4ReadLength: Int = 255, readUID: Bool = true,
        fastRead: ReaderProfile.FastRead? = nil
    ) {
        self.maxAPDUs = maxAPDUs
        self.maxType4ReadLength = maxType4ReadLength
        self.readUID = readUID
        self.fastRead = fastRead
    }
}

/// Reads a tag's UID and NDEF message over a `CardTransport`, and extracts its URIs. Pure logic: all
/// I/O goes through the transport.
///
/// Outcomes: a `TagReadResult` for every read that completed, including those that found no URL
/// (`noURLReason` says why: blank or unformatted tag, empty message, no URI record, MIFARE Classic or
/// another unsupported card); a `TagReadError` for reads that failed (see its documentation).
public enum TagReader {
    /// Reads the tag whose ATR is `atr`, choosing the method with `TagKind.from(atr:)`.
    public static func read(
        atr: [UInt8], transport: inout some CardTransport,
        options: TagReadOptions = TagReadOptions()
    ) throws(TagReadError) -> TagReadResult {
        try read(kind: TagKind.from(atr: atr), transport: &transport, options: options)
    }

    /// Reads a tag of a known kind. The transport is handed back (with whatever state it recorded)
    /// whether the read succeeds or throws.
    public static func read(
        kind: TagKind, transport: inout some CardTransport,
        options: TagReadOptions = TagReadOptions()
    ) throws(TagReadError) -> TagReadResult {
        var session = CardSession(transport: transport, limit: options.maxAPDUs)
        defer { transport = session.transport }

        // A Type 2 tag read with FAST_READ gets its UID from the same exchange as its NDEF message (pages 0-2).
        let isType2: Bool = {
            if case .type2 = kind { return true }
            return false
        }()
        let uidFromPages = isType2 && options.fastRead != nil && options.readUID
        var uid = options.readUID && !uidFromPages ? try session.readUID().map(kind.uidAsWritten) : nil
        let lookup: NDEFLookup
        var fastReadUse = FastReadUse.notTried
        var signature: [UInt8]?
        var version: [UInt8]?
        switch kind {
        case .type2:
            var reader = Type2TagReader(
                session: session, fastRead: options.fastRead, readsUID: uidFromPages,
                readsSignature: options.readSignature)
            defer {
                session = reader.session
                fastReadUse = reader.fastReadUse
                signature = reader.signature
                version = reader.version
                if uidFromPages { uid = reader.uid }
            }
            lookup = try reader.readNDEF()
        case .type4:
            var reader = Type4TagReader(session: session, maxReadLength: max(1, min(options.maxType4ReadLength, 255)))
            defer { session = reader.session }
            lookup = try reader.readNDEF()
        case .mifareClassic(let name):
            // MIFARE Plus 2K/4K in security level 1 or 2 answer as a Classic of their size: MAD2 in sector 16.
            var reader = ClassicTagReader(session: session, is4K: name.hasSuffix("4K") || name.hasSuffix("2K"))
            defer { session = reader.session }
            lookup = try reader.readNDEF()
        case .type5 where options.readsISO15693:
            var reader = Type5TagReader(session: session)
            defer { session = reader.session }
            lookup = try reader.readNDEF()
        case .type5:
            lookup = .none(reason: ReaderProfile.cannotReadISO15693)
        case .unsupported:
            lookup = .none(reason: "\(kind): no NDEF read for this card type")
        }
        var read = try result(uid: uid, kind: kind, lookup: lookup, apduCount: session.count)
        read.fastRead = fastReadUse
        read.signature = signature
        read.version = version
        return read
    }

    /// Turns the raw lookup into a result: parses the message and finds its URIs.
    static func result(
        uid: [UInt8]?, kind: TagKind, lookup: NDEFLookup,
        apduCount: Int
    ) throws(TagReadError) -> TagReadResult {
        switch lookup {
        case .none(let reason):
            return TagReadResult(
                uid: uid, kind: kind, ndef: nil, records: [], uris: [], noURLReason: reason,
                apduCount: apduCount)
        case .message(let bytes) where bytes.isEmpty:
            return TagReadResult(
                uid: uid, kind: kind, ndef: [], records: [], uris: [],
                noURLReason: "empty NDEF message", apduCount: apduCount)
        case .message(let bytes):
            let records: [NDEFRecord]
            do throws(NDEFError) {
                records = try NDEFParser.parseMessage(bytes)
            } catch {
                throw .invalidNDEF(error)
            }
            let uris = NDEFURI.uris(in: records)
            let reason = uris.isEmpty ? noURIReason(records) : nil
            return TagReadResult(
                uid: uid, kind: kind, ndef: bytes, records: records, uris: uris,
                noURLReason: reason, apduCount: apduCount)
        }
    }

    /// "NDEF message has no URI record (2 records: TNF 1 type T, TNF 2 type text/plain)".
    static func noURIReason(_ records: [NDEFRecord]) -> String {
        let shown = records.prefix(4).map { record -> String in
            let typeBytes = record.type.prefix(32)
            // Printable ASCII only, so a hostile type cannot break the one-line log format.
            let printable = typeBytes.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
            let type =
                printable
                ? String(decoding: typeBytes, as: UTF8.self)
                : "0x" + NFCHex.bytes(typeBytes, separator: "")
            return "TNF \(record.tnf) type \(type.isEmpty ? "(none)" : type)"
        }
        let more = records.count > shown.count ? ", ..." : ""
        let count = "\(records.count) record\(records.count == 1 ? "" : "s")"
        return "NDEF message has no URI record (\(count): \(shown.joined(separator: ", "))\(more))"
    }
}
