/// Reads the NDEF message of an NFC Forum Type 2 tag through a PC/SC reader (`FF B0` page reads).
///
/// Sequence: `FF B0 00 03 10` (CC in page 3 and the first 12 data bytes), then TLVs are walked from
/// data offset 0 (page 4), reading further pages only when the walk needs them:
/// `00` NULL skipped; `01` Lock Control, `02` Memory Control, `FD` proprietary and unknown tags skipped
/// by their length (the Type 2 spec asks readers to jump over unknown TLVs); `03` NDEF read and
/// returned (the first one only); `FE` terminator ends the walk. Lengths are 1 byte, or `FF` + 2 bytes.
///
/// Reads never cross the end of the CC-declared data area (pages 4 ..< 4 + size/4): a read near the end
/// asks for fewer than 16 bytes (Le = bytes left in the area, a multiple of 4 because the size is a
/// multiple of 8). Reading past the tag end jams some ACR122U firmware until the tag is removed. The one
/// exception is the first read of pages 3-6, made before the CC is known: every Type 2 tag has at least
/// 16 pages, so it stays on the tag; bytes it returns beyond a tiny declared area are discarded.
///
/// Progress is by the bytes actually returned (some readers return 4 bytes when asked for 16); a read
/// that returns no new byte is an error, so a reader answering 9000 with no data cannot loop.
///
/// Memory Control TLVs can declare reserved bytes *inside* the data area that an NDEF message skips
/// over; that layout is not supported (NTAG21x and Ultralight C keep their lock bytes after the data
/// area, so it does not arise on them).
struct Type2TagReader<Transport: CardTransport> {
    /// Bytes the reader asks for per `FF B0` read (4 pages).
    static var maxReadLength: Int { 16 }

    var session: CardSession<Transport>
    /// Data-area bytes held: `buffer[i]` is data offset `bufferStart + i`.
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    private var areaSize = 0

    init(session: CardSession<Transport>) {
        self.session = session
    }

    private var bufferEnd: Int { bufferStart + buffer.count }

    mutating func readNDEF() throws(TagReadError) -> NDEFLookup {
        let command = "READ BINARY pages 3-6 (FF B0 00 03 10)"
        let first = try session.exchange([0xFF, 0xB0, 0x00, 0x03, 0x10], command)
        guard first.isSuccess else { throw .statusWord(first.statusWord, during: command) }
        let cc: Type2CapabilityContainer
        switch Type2CapabilityContainer.parse(Array(first.data.prefix(4))) {
        case .valid(let parsed): cc = parsed
        case .notFormatted(let reason): return .none(reason: reason)
        case .invalid(let reason):
            if first.data.count < 4 {
                throw .malformedResponse(during: command, reason: reason)
            }
            throw .badCapabilityContainer(reason)
        }
        areaSize = cc.dataAreaSize
        buffer = Array(first.data.dropFirst(4).prefix(min(12, areaSize)))
        bufferStart = 0
        return try walkTLVs()
    }

    private mutating func walkTLVs() throws(TagReadError) -> NDEFLookup {
        var offset = 0
        while offset < areaSize {
            try ensure(offset..<(offset + 1))
            let tag = byte(at: offset)
            switch tag {
            case 0x00:
                offset += 1
                continue
            case 0xFE:
                return .none(
                    reason: offset == 0
                        ? "no NDEF message: terminator TLV at the start of the data area"
                        : "no NDEF message before the terminator TLV")
            default:
                break
            }
            guard offset + 2 <= areaSize else { throw .tlvTruncated(tag: tag, offset: offset) }
            try ensure((offset + 1)..<(offset + 2))
            var length = Int(byte(at: offset + 1))
            var valueStart = offset + 2
            if length == 0xFF {
                guard offset + 4 <= areaSize else { throw .tlvTruncated(tag: tag, offset: offset) }
                try ensure((offset + 2)..<(offset + 4))
                length = Int(byte(at: offset + 2)) << 8 | Int(byte(at: offset + 3))
                valueStart = offset + 4
            }
            let available = areaSize - valueStart
            guard length <= available else {
                throw .tlvExceedsArea(tag: tag, offset: offset, length: length, available: available)
            }
            if tag == 0x03 {
                guard length > 0 else { return .message([]) }
                try ensure(valueStart..<(valueStart + length))
                let from = valueStart - bufferStart
                return .message(Array(buffer[from..<(from + length)]))
            }
            offset = valueStart + length
        }
        return .none(reason: "no NDEF TLV in the \(areaSize)-byte data area")
    }

    /// The data byte at `offset`; only called after `ensure` covered it.
    private func byte(at offset: Int) -> UInt8 {
        let index = offset - bufferStart
        guard index >= 0 && index < buffer.count else { return 0 }
        return buffer[index]
    }

    /// Makes the buffer hold `range` (which the caller keeps inside the data area), reading pages as needed.
    private mutating func ensure(_ range: Range<Int>) throws(TagReadError) {
        guard range.upperBound > bufferEnd || range.lowerBound < bufferStart else { return }
        if range.lowerBound < bufferStart || range.lowerBound > bufferEnd {
            // Not contiguous with what we hold (a skipped TLV value): restart at the page of the range.
            bufferStart = range.lowerBound & ~3
            buffer = []
        }
        let target = min(range.upperBound, areaSize)
        while bufferEnd < target {
            let pageOffset = bufferEnd & ~3
            let skip = bufferEnd - pageOffset
            let page = 4 + pageOffset / 4
            let length = min(Self.maxReadLength, areaSize - pageOffset)
            let apdu: [UInt8] = [
                0xFF, 0xB0, UInt8(truncatingIfNeeded: page >> 8), UInt8(truncatingIfNeeded: page),
                UInt8(truncatingIfNeeded: length),
            ]
            func command() -> String { "READ BINARY page \(page), \(length) bytes (\(NFCHex.bytes(apdu)))" }
            let response = try session.exchange(apdu, command())
            guard response.isSuccess else { throw .statusWord(response.statusWord, during: command()) }
            // Never keep bytes beyond what was asked (and so beyond the area), whatever the reader sent.
            let returned = response.data.prefix(length)
            guard returned.count > skip else {
                throw .malformedResponse(during: command(), reason: "returned \(response.data.count) data bytes")
            }
            buffer.append(contentsOf: returned.dropFirst(skip))
        }
    }
}
