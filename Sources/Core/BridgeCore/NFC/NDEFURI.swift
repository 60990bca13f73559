/// URIs in NDEF: the NFC Forum URI record type definition (RTD-URI 1.0) and URI extraction.
public enum NDEFURI {
    /// The RTD-URI identifier codes 0x00...0x23: `prefixes[code]` is prepended to the rest of the payload.
    public static let prefixes: [String] = [
        "",  // 0x00 no prefix
        "http://www.",  // 0x01
        "https://www.",  // 0x02
        "http://",  // 0x03
        "https://",  // 0x04
        "tel:",  // 0x05
        "mailto:",  // 0x06
        "ftp://anonymous:anonymous@",  // 0x07
        "ftp://ftp.",  // 0x08
        "ftps://",  // 0x09
        "sftp://",  // 0x0A
        "smb://",  // 0x0B
        "nfs://",  // 0x0C
        "ftp://",  // 0x0D
        "dav://",  // 0x0E
        "news:",  // 0x0F
        "telnet://",  // 0x10
        "imap:",  // 0x11
        "rtsp://",  // 0x12
        "urn:",  // 0x13
        "pop:",  // 0x14
        "sip:",  // 0x15
        "sips:",  // 0x16
        "tftp:",  // 0x17
        "btspp://",  // 0x18
        "btl2cap://",  // 0x19
        "btgoep://",  // 0x1A
        "tcpobex://",  // 0x1B
        "irdaobex://",  // 0x1C
        "file://",  // 0x1D
        "urn:epc:id:",  // 0x1E
        "urn:epc:tag:",  // 0x1F
        "urn:epc:pat:",  // 0x20
        "urn:epc:raw:",  // 0x21
        "urn:epc:",  // 0x22
        "urn:nfc:",  // 0x23
    ]

    /// Decodes the payload of a well-known URI record: identifier code, then the UTF-8 rest.
    ///
    /// Returns nil for an empty payload or a rest that is not valid UTF-8. Codes above 0x23 are
    /// reserved (RFU); RTD-URI says a reader treats them as 0x00, so the rest is returned unprefixed
    /// rather than the record being dropped. Trailing NUL padding is not part of the URI (`withoutNULPadding`).
    public static func decode(payload: [UInt8]) -> String? {
        guard let code = payload.first else { return nil }
        guard let rest = String(validating: withoutNULPadding(payload.dropFirst()), as: UTF8.self) else { return nil }
        let index = Int(code)
        let prefix = index < prefixes.count ? prefixes[index] : ""
        return prefix + rest
    }

    /// The URI a single record carries: a well-known `U` record or an absolute-URI (TNF 3) record,
    /// whose type field is the URI. Nil for other records, invalid UTF-8 or an empty URI.
    public static func decode(record: NDEFRecord) -> String? {
        let uri: String?
        if record.tnf == NDEFRecord.TNF.wellKnown && record.type == NDEFRecord.WellKnownType.uri {
            uri = decode(payload: record.payload)
        } else if record.tnf == NDEFRecord.TNF.absoluteURI {
            uri = String(validating: withoutNULPadding(record.type[...]), as: UTF8.self)
        } else {
            uri = nil
        }
        guard let uri, !uri.isEmpty else { return nil }
        return uri
    }

    /// `bytes` without trailing NULs. Tags written by common apps pad the URI record with NULs up to a size of
    /// their choosing (a public NTAG216 dump reads `https://www.guidoz.com` followed by six NULs); the padding is
    /// not part of the URI (RFC 3986 has no NUL), so it is dropped. A NUL before other bytes stays, and the read
    /// is then unrecognized with a reason that names it (`UnrecognizedReason.controlCharacter`).
    public static func withoutNULPadding(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[end - 1] == 0 { end -= 1 }
        return bytes[bytes.startIndex..<end]
    }

    /// All URIs in `records`, in message order.
    ///
    /// A smart poster (`Sp`) contributes the URIs of its nested message at its position. Nesting is
    /// followed at most `NDEFParser.maxNestingDepth` levels; a smart poster whose payload does not
    /// parse contributes nothing (the other records still count). Empty URIs are skipped.
    public static func uris(in records: [NDEFRecord]) -> [String] {
        var found: [String] = []
        collect(records, depth: 0, into: &found)
        return found
    }

    private static func collect(_ records: [NDEFRecord], depth: Int, into found: inout [String]) {
        for record in records {
            if let uri = decode(record: record) {
                found.append(uri)
            } else if record.tnf == NDEFRecord.TNF.wellKnown && record.type == NDEFRecord.WellKnownType.smartPoster {
                do throws(NDEFError) {
                    let inner = try NDEFParser.parseNestedMessage(record.payload, depth: depth + 1)
                    collect(inner, depth: depth + 1, into: &found)
                } catch {
                    continue
                }
            }
        }
    }

    /// Encodes `uri` as a URI record payload with the longest matching prefix code (exact, case-sensitive).
    public static func encodePayload(_ uri: String) -> [UInt8] {
        var bestCode = 0
        var bestLength = 0
        for (code, prefix) in prefixes.enumerated() where code > 0 {
            if prefix.utf8.count > bestLength && uri.utf8.starts(with: prefix.utf8) {
                bestCode = code
                bestLength = prefix.utf8.count
            }
        }
        return [UInt8(bestCode)] + Array(uri.utf8.dropFirst(bestLength))
    }
}
