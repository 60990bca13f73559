/// Encoding of NDEF messages (the inverse of `NDEFParser`), for tests, rigs and tools.
public enum NDEFMessage {
    /// Encodes `records` as one NDEF message.
    ///
    /// MB is set on the first record and ME on the last; SR is used when the payload is shorter than
    /// 256 bytes; IL when the id is non-empty. An empty array encodes to no bytes (not to an empty
    /// TNF 0 record), which is what a Type 2 NDEF TLV of length 0 or a Type 4 NLEN of 0 holds.
    ///
    /// Type and id longer than 255 bytes cannot be framed: this is a programming error (the builders
    /// are not fed from tags), so it stops with a precondition failure rather than writing garbage.
    public static func encode(_ records: [NDEFRecord]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, record) in records.enumerated() {
            precondition(record.type.count <= 255, "NDEF record type longer than 255 bytes")
            precondition(record.id.count <= 255, "NDEF record id longer than 255 bytes")
            precondition(UInt64(record.payload.count) <= UInt64(UInt32.max), "NDEF payload longer than 4 GiB")
            let short = record.payload.count < 256
            var header = record.tnf & 0x07
            if index == 0 { header |= 0x80 }
            if index == records.count - 1 { header |= 0x40 }
            if short { header |= 0x10 }
            if !record.id.isEmpty { header |= 0x08 }
            out.append(header)
            out.append(UInt8(record.type.count))
            if short {
                out.append(UInt8(record.payload.count))
            } else {
                let length = UInt32(record.payload.count)
                out.append(contentsOf: [
                    UInt8(length >> 24), UInt8((length >> 16) & 0xFF),
                    UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF),
                ])
            }
            if !record.id.isEmpty {
                out.append(UInt8(record.id.count))
            }
            out.append(contentsOf: record.type)
            out.append(contentsOf: record.id)
            out.append(contentsOf: record.payload)
        }
        return out
    }
}
