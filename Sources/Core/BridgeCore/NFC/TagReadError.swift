/// Why a tag read failed. Each case renders as one line for the log (`description`).
///
/// Errors are for reads that did not complete or found malformed structures: the card left, the
/// transport failed, the card answered an unexpected status word, or the capability container, TLVs,
/// NLEN or NDEF message are malformed. Retrying with the tag still in place may or may not help; the
/// caller logs the line and does not spool anything.
///
/// A read that completed but found no URL (blank or unformatted tag, empty NDEF message, no URI
/// record, a MIFARE Classic or other unsupported card) is *not* an error: it is a `TagReadResult`
/// with `noURLReason` set, and the pipeline spools it as unrecognized with the UID.
///
/// `noNDEFApplication` is an error, not a result: it is a phone or a bank card, not a tag, and the
/// design wants one clear log line for it and nothing spooled.
public enum TagReadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The card left during `during` (transport said so, or the response was shorter than 2 bytes).
    case cardRemoved(during: String)
    /// The transport failed during `during` for another reason.
    case transportFailed(during: String, reason: String)
    /// The card answered `statusWord` (not 9000) to `during`.
    case statusWord(UInt16, during: String)
    /// The response to `during` had the wrong shape (e.g. no data bytes, or fewer than needed).
    case malformedResponse(during: String, reason: String)
    /// The capability container is unusable; the reason says which field and why.
    case badCapabilityContainer(String)
    /// The ISO-DEP card has no NFC Forum NDEF application (SELECT D2760000850101 answered `statusWord`).
    case noNDEFApplication(statusWord: UInt16)
    /// A Type 2 TLV header (tag `tag` at data-area offset `offset`) is cut by the end of the data area.
    case tlvTruncated(tag: UInt8, offset: Int)
    /// A Type 2 TLV (tag `tag` at `offset`) declares `length` value bytes but only `available` remain in the
    /// CC-declared data area (for tag 0x03 this is the NDEF message being larger than the area).
    case tlvExceedsArea(tag: UInt8, offset: Int, length: Int, available: Int)
    /// A Type 4 NLEN larger than the NDEF file can hold (`maxSize` includes the 2 NLEN bytes).
    case ndefFileTooLarge(nlen: Int, maxSize: Int)
    /// The NDEF message bytes were read but do not parse.
    case invalidNDEF(NDEFError)
    /// The read needed more than `limit` APDUs (a reader or tag that keeps answering with no progress).
    case tooManyCommands(limit: Int)

    /// True when the card left the field mid-read.
    public var isCardRemoved: Bool {
        if case .cardRemoved = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .cardRemoved(let during):
            return "card removed during \(during)"
        case .transportFailed(let during, let reason):
            return "transport failed during \(during): \(reason)"
        case .statusWord(let sw, let during):
            return "status word \(NFCHex.word(sw)) for \(during)"
        case .malformedResponse(let during, let reason):
            return "malformed response to \(during): \(reason)"
        case .badCapabilityContainer(let reason):
            return "bad capability container: \(reason)"
        case .noNDEFApplication(let sw):
            return "no NDEF application on this ISO-DEP card (SELECT answered \(NFCHex.word(sw))): "
                + "a phone or a bank card, not an NFC tag"
        case .tlvTruncated(let tag, let offset):
            return "TLV 0x\(NFCHex.byte(tag)) at data offset \(offset) is cut by the end of the data area"
        case .tlvExceedsArea(let tag, let offset, let length, let available):
            let what = tag == 0x03 ? "NDEF TLV" : "TLV 0x\(NFCHex.byte(tag))"
            return "\(what) at data offset \(offset) declares \(length) bytes but the data area has \(available) left"
        case .ndefFileTooLarge(let nlen, let maxSize):
            return "NLEN \(nlen) exceeds the NDEF file size \(maxSize) (minus 2 NLEN bytes)"
        case .invalidNDEF(let error):
            return "invalid NDEF message: \(error)"
        case .tooManyCommands(let limit):
            return "gave up after \(limit) APDUs without completing the read"
        }
    }
}
