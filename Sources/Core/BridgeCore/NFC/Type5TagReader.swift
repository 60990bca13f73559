/// Reads the NDEF message of an NFC Forum Type 5 tag (ISO 15693: NXP ICODE SLIX, ST25DV, TI Tag-it) through the
/// PC/SC Part 3 READ BINARY a reader with ISO 15693 support maps onto the tag's block reads:
///
/// - `FF B0 <block high> <block low> 00`: block 0, whatever the tag's block size (the answer's length tells it);
/// - `FF B0 <block high> <block low> <n x block size>`: n blocks from there in one exchange (the reader sends the
///   tag READ MULTIPLE BLOCKS), tried only when the CC says the tag takes it (MBREAD); a reader or tag that
///   refuses it is read one block per exchange for the rest of the read.
///
/// The CC (`Type5CapabilityContainer`) opens block 0; the TLVs follow it in the T5T_Area, read no further than
/// the NDEF TLV's end, which the walk over its header tells before the rest is fetched. A TLV before it that is not
/// the message (Lock or Memory Control, Proprietary) is stepped over by its length, its blocks not read.
struct Type5TagReader<Transport: CardTransport> {
    var session: CardSession<Transport>
    /// The tag's block size in bytes, from block 0's answer (ISO 15693 allows 1 to 32).
    private(set) var blockSize = 0
    /// Whether n-block reads are still tried (the CC allows them and nothing has refused one).
    private(set) var multipleBlocks = false
    /// The bytes read so far, from block 0 on.
    private var data: [UInt8] = []

    /// The most bytes one n-block read asks for: ISO 15693 readers answer at most a few hundred bytes per frame,
    /// and a Plings URL (under 100 bytes) needs one.
    static var bytesPerExchange: Int { 128 }
    /// The first n-block read after the CC asks for at least this much, before the NDEF TLV's length is known.
    static var firstRead: Int { 64 }

    init(session: CardSession<Transport>) {
        self.session = session
    }

    /// Where the message is, or why there is none.
    mutating func readNDEF() throws(TagReadError) -> NDEFLookup {
        let first = try read(block: 0, count: 1, asBlocks: false)
        guard (1...32).contains(first.count) else {
            throw .malformedResponse(during: "READ BINARY block 0", reason: "\(first.count) bytes is not a block size")
        }
        blockSize = first.count
        data = first
        while data.count < 4 { try readNext(upTo: 4) }
        var parsed = Type5CapabilityContainer.parse(data)
        if parsed == .needsEightBytes {
            while data.count < 8 { try readNext(upTo: 8) }
            parsed = Type5CapabilityContainer.parse(data)
        }
        let cc: Type5CapabilityContainer
        switch parsed {
        case .valid(let valid): cc = valid
        case .notFormatted(let reason): return .none(reason: reason)
        case .invalid(let reason): throw .badCapabilityContainer(reason)
        case .needsEightBytes: throw .badCapabilityContainer("8-byte capability container cut short")
        }
        multipleBlocks = cc.multipleBlockRead
        let end = cc.length + cc.areaSize
        while true {
            let area = Array(data[min(cc.length, data.count)..<min(end, data.count)])
            let complete = data.count >= end
            switch NDEFTLVWalk.walk(area, complete: complete, area: "the T5T_Area") {
            case .found(let lookup): return lookup
            case .malformed(let error): throw error
            case .needMore(let bytes, let from):
                // A TLV that is not the message (a Proprietary TLV of an ST25DV, say) is skipped by its length: its
                // blocks are never read, and the walk, which steps over its value, never looks at the filler.
                // The first n-block read from the start of the area, or from a skip, asks for `firstRead` bytes.
                var readFrom = cc.length
                // Never past the area: a TLV whose length runs beyond it leaves the whole area "read", and the walk
                // over the complete area calls it truncated, with no read beyond the tag's end.
                let skipTo = min((cc.length + from) / blockSize * blockSize, end)
                if skipTo > data.count {
                    data += [UInt8](repeating: 0, count: skipTo - data.count)
                    readFrom = skipTo
                }
                // Skipped to the end of the area: nothing is left to read, the walk over the complete area decides.
                if data.count >= end { continue }
                // One exchange, then walk again: what the TLV header says decides the next read.
                let wanted = max(cc.length + bytes, multipleBlocks ? readFrom + Self.firstRead : 0)
                try readNext(upTo: min(wanted, end))
            }
        }
    }

    /// One exchange from the next unread block towards `bytes` bytes in `data` (rounded up to a whole block): as
    /// many blocks as that takes, up to `bytesPerExchange`, while the tag takes n-block reads; else one block.
    private mutating func readNext(upTo bytes: Int) throws(TagReadError) {
        let wanted = max(1, (bytes - data.count + blockSize - 1) / blockSize)
        let count = multipleBlocks ? min(wanted, max(1, Self.bytesPerExchange / blockSize)) : 1
        data += try read(block: data.count / blockSize, count: count, asBlocks: true)
    }

    /// READ BINARY of `count` blocks from `block`; `asBlocks` false asks for block 0 with Le 00.
    private mutating func read(block: Int, count: Int, asBlocks: Bool) throws(TagReadError) -> [UInt8] {
        let expected = asBlocks ? count * blockSize : 0
        let command =
            count == 1 ? "READ BINARY block \(block)" : "READ BINARY blocks \(block)-\(block + count - 1)"
        let apdu: [UInt8] = [0xFF, 0xB0, UInt8(block >> 8 & 0xFF), UInt8(block & 0xFF), UInt8(expected & 0xFF)]
        let response = try session.exchange(apdu, command)
        if count > 1, !response.isSuccess || response.data.count != expected {
            // The reader or the tag refused READ MULTIPLE BLOCKS although the CC offers it: one block at a time.
            multipleBlocks = false
            return try read(block: block, count: 1, asBlocks: true)
        }
        guard response.isSuccess else { throw .statusWord(response.statusWord, during: command) }
        guard !asBlocks || response.data.count == expected else {
            throw .malformedResponse(
                during: command, reason: "\(response.data.count) bytes instead of \(expected)")
        }
        return response.data
    }
}
