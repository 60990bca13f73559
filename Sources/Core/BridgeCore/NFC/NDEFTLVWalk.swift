/// The TLVs of an NFC Forum tag's data area (NULL `00`, Lock and Memory Control `01`/`02`, NDEF `03`, proprietary
/// `FD`, terminator `FE`), walked over the bytes read so far. MIFARE Classic NDEF sectors and the Type 5 T5T_Area
/// hold the same TLVs; a reader that fetches the area piece by piece asks after each piece whether it has enough.
enum NDEFTLVWalk {
    enum Step: Equatable {
        /// The bytes so far end inside a TLV: read on until there are at least `bytes` (the end of the TLV being
        /// walked when its length is known, else the end of its longest header). Bytes before `from` are not
        /// needed: they are the value of a TLV that is not the NDEF message, which the walk steps over by its length
        /// (NFC Forum Type 2 and Type 5 Tag specifications: a reader skips a TLV it does not use), so a reader that
        /// can read from anywhere starts at `from` and may fill the gap with anything.
        case needMore(bytes: Int, from: Int)
        case found(NDEFLookup)
        case malformed(TagReadError)
    }

    /// `complete`: no more bytes will come (a TLV cut off is then an error, not a reason to read on); `area` names
    /// where the TLVs live in the reason for a tag without an NDEF TLV.
    static func walk(_ data: [UInt8], complete: Bool = false, area: String = "the data area") -> Step {
        var offset = 0
        while offset < data.count {
            let tag = data[offset]
            if tag == 0x00 {
                offset += 1
                continue
            }
            if tag == 0xFE { return .found(.none(reason: "no NDEF message before the terminator TLV")) }
            guard offset + 1 < data.count else { return cut(tag, offset, needed: offset + 4, complete) }
            var length = Int(data[offset + 1])
            var valueStart = offset + 2
            if length == 0xFF {
                guard offset + 3 < data.count else { return cut(tag, offset, needed: offset + 4, complete) }
                length = Int(data[offset + 2]) << 8 | Int(data[offset + 3])
                valueStart = offset + 4
            }
            guard valueStart + length <= data.count else {
                guard tag != 0x03, !complete else { return cut(tag, offset, needed: valueStart + length, complete) }
                // Not the message: only the next TLV's header, from where this one ends, is worth reading.
                return .needMore(bytes: valueStart + length + 1, from: valueStart + length)
            }
            if tag == 0x03 { return .found(.message(Array(data[valueStart..<(valueStart + length)]))) }
            offset = valueStart + length
        }
        return complete
            ? .found(.none(reason: "no NDEF TLV in \(area)")) : .needMore(bytes: data.count + 1, from: data.count)
    }

    private static func cut(_ tag: UInt8, _ offset: Int, needed: Int, _ complete: Bool) -> Step {
        complete ? .malformed(.tlvTruncated(tag: tag, offset: offset)) : .needMore(bytes: needed, from: offset)
    }
}
