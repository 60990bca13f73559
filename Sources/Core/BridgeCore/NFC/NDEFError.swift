/// Why a byte string is not a well-formed NDEF message. Record indices are 0-based.
public enum NDEFError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No bytes at all (a Type 2 TLV of length 0 or NLEN 0 is handled by the tag reader, not here).
    case emptyMessage
    /// The record header (flags, lengths) does not fit in the bytes left.
    case truncatedHeader(record: Int, offset: Int)
    /// The record's type, id and payload need `by` more bytes than the message has.
    case recordOverrunsMessage(record: Int, by: Int)
    /// The record has the CF flag or TNF 6 (unchanged): chunked records are not supported.
    case chunkedRecord(record: Int)
    /// The first record does not have the MB flag.
    case missingMessageBegin
    /// A record other than the first has the MB flag.
    case unexpectedMessageBegin(record: Int)
    /// The bytes ended after `records` records without one carrying the ME flag.
    case missingMessageEnd(records: Int)
    /// More records than `NDEFParser.maxRecords`.
    case tooManyRecords(limit: Int)
    /// Nested messages (smart posters) deeper than `NDEFParser.maxNestingDepth`.
    case nestingTooDeep(limit: Int)

    public var description: String {
        switch self {
        case .emptyMessage:
            return "empty NDEF message"
        case .truncatedHeader(let record, let offset):
            return "NDEF record \(record) header at offset \(offset) is truncated"
        case .recordOverrunsMessage(let record, let by):
            return "NDEF record \(record) overruns the message by \(by) byte\(by == 1 ? "" : "s")"
        case .chunkedRecord(let record):
            return "NDEF record \(record) is chunked (CF or TNF 6): chunked records are not supported"
        case .missingMessageBegin:
            return "first NDEF record lacks the MB (message begin) flag"
        case .unexpectedMessageBegin(let record):
            return "NDEF record \(record) has the MB (message begin) flag but is not the first"
        case .missingMessageEnd(let records):
            let plural = records == 1 ? "" : "s"
            return "NDEF message ends after \(records) record\(plural) without the ME (message end) flag"
        case .tooManyRecords(let limit):
            return "NDEF message has more than \(limit) records"
        case .nestingTooDeep(let limit):
            return "NDEF messages nested deeper than \(limit) levels"
        }
    }
}
