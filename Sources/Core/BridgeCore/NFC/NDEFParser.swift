/// Parses NDEF messages (NFC Forum NDEF 1.0) from untrusted bytes.
///
/// Every length is checked against the bytes left before it is used, so any input either parses or
/// throws an `NDEFError`; nothing traps. Supported: short (SR) and long records, the IL/id field, all
/// TNF values (TNF 7 is kept as read; callers treat it as unknown). Refused: chunked records (CF flag,
/// or TNF 6 which only appears inside a chunk sequence).
///
/// Trailing bytes after the record with ME are tolerated and ignored: the message is fully delimited
/// by ME, and some writers pad the NDEF area or declare a TLV/NLEN length that includes padding.
/// Rejecting them would turn a readable URL into a failed read for no gain.
///
/// Type lengths are not checked against the TNF (e.g. a TNF 0 record with a payload is accepted as
/// read): such records are harmless because only `U`, `Sp` and TNF 3 records are ever interpreted.
public enum NDEFParser {
    /// The most records one message may hold (a tag holds a handful; this bounds work on garbage).
    public static let maxRecords = 256
    /// The deepest nesting of messages in records (a smart poster is one level) that is followed.
    public static let maxNestingDepth = 4

    /// Parses a complete NDEF message.
    public static func parseMessage(_ bytes: [UInt8]) throws(NDEFError) -> [NDEFRecord] {
        try parseMessage(bytes[...])
    }

    /// Parses a complete NDEF message from a slice (indices need not start at 0).
    public static func parseMessage(_ bytes: ArraySlice<UInt8>) throws(NDEFError) -> [NDEFRecord] {
        guard !bytes.isEmpty else { throw .emptyMessage }
        let start = bytes.startIndex
        let end = bytes.endIndex
        var records: [NDEFRecord] = []
        var position = start
        while true {
            let index = records.count
            guard index < maxRecords else { throw .tooManyRecords(limit: maxRecords) }
            guard position < end else { throw .missingMessageEnd(records: index) }
            let header = bytes[position]
            let messageBegin = header & 0x80 != 0
            let messageEnd = header & 0x40 != 0
            let chunked = header & 0x20 != 0
            let shortRecord = header & 0x10 != 0
            let hasID = header & 0x08 != 0
            let tnf = header & 0x07
            if index == 0 && !messageBegin { throw .missingMessageBegin }
            if index > 0 && messageBegin { throw .unexpectedMessageBegin(record: index) }
            if chunked || tnf == NDEFRecord.TNF.unchanged { throw .chunkedRecord(record: index) }

            // Fixed part after the header byte: TYPE_LENGTH, PAYLOAD_LENGTH (1 or 4), ID_LENGTH (0 or 1).
            let fixedLength = 1 + (shortRecord ? 1 : 4) + (hasID ? 1 : 0)
            var cursor = position + 1
            guard end - cursor >= fixedLength else {
                throw .truncatedHeader(record: index, offset: position - start)
            }
            let typeLength = Int(bytes[cursor])
            cursor += 1
            let payloadLength: Int
            if shortRecord {
                payloadLength = Int(bytes[cursor])
                cursor += 1
            } else {
                // UInt32 always fits in Int on the 64-bit platforms this runs on.
                var value = 0
                for offset in 0..<4 {
                    value = (value << 8) | Int(bytes[cursor + offset])
                }
                payloadLength = value
                cursor += 4
            }
            let idLength = hasID ? Int(bytes[cursor]) : 0
            if hasID { cursor += 1 }

            let bodyLength = typeLength + idLength + payloadLength
            let available = end - cursor
            guard bodyLength <= available else {
                throw .recordOverrunsMessage(record: index, by: bodyLength - available)
            }
            let typeEnd = cursor + typeLength
            let idEnd = typeEnd + idLength
            let payloadEnd = idEnd + payloadLength
            records.append(
                NDEFRecord(
                    tnf: tnf, type: Array(bytes[cursor..<typeEnd]),
                    id: Array(bytes[typeEnd..<idEnd]), payload: Array(bytes[idEnd..<payloadEnd])))
            position = payloadEnd
            if messageEnd { return records }
        }
    }

    /// Parses a message nested `depth` levels deep (a smart poster payload is depth 1).
    ///
    /// Throws `nestingTooDeep` beyond `maxNestingDepth`, so a hostile tag cannot make recursion
    /// unbounded (each level also costs at least 3 bytes, but the limit keeps the stack small).
    public static func parseNestedMessage(_ bytes: [UInt8], depth: Int) throws(NDEFError) -> [NDEFRecord] {
        guard depth <= maxNestingDepth else { throw .nestingTooDeep(limit: maxNestingDepth) }
        return try parseMessage(bytes)
    }
}
