/// What a tag-type reader found where the NDEF message lives.
enum NDEFLookup: Equatable {
    /// The raw message bytes (possibly empty: a formatted tag with an empty message).
    case message([UInt8])
    /// No message on this tag, and why (a result, not an error).
    case none(reason: String)
}
