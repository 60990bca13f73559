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
/// With a fast-read method (`ReaderProfile.FastRead`) the same walk reads through NTAG FAST_READ instead: the
/// first exchange asks for pages 0-0x27 (the UID, the CC and the whole NTAG213 data area, all inside the smallest
/// NTAG21x), so a tag with a typical Plings URL takes one exchange; later ones ask for up to `FastRead.maxPages`
/// pages at once, never past the CC-declared area. The UID comes from pages 0-2 as the NTAG21x datasheet lays
/// them out (UID0-2 and BCC0 = 0x88 ^ UID0 ^ UID1 ^ UID2 in page 0, UID3-6 in page 1, BCC1 = UID3 ^ ... ^ UID6
/// first in page 2): the 7 bytes the reader's GET UID gives. Both check bytes must hold, else the fast attempt
/// ends. Any reply that is not exactly the bytes asked for ends it too: the read starts again with GET UID and
/// READ BINARY (`fastReadUse` says so), so a bad pass-through reply can cost exchanges but never change the
/// result.
///
/// Memory Control TLVs can declare reserved bytes *inside* the data area that an NDEF message skips
/// over; that layout is not supported (NTAG21x and Ultralight C keep their lock bytes after the data
/// area, so it does not arise on them).
struct Type2TagReader<Transport: CardTransport> {
    /// Bytes the reader asks for per `FF B0` read (4 pages).
    static var maxReadLength: Int { 16 }
    /// The last page of the first FAST_READ: the end of the NTAG213 data area (pages 4-39).
    static var firstFastReadEnd: Int { 0x27 }

    var session: CardSession<Transport>
    /// The pass-through to try first, if any.
    let fastRead: ReaderProfile.FastRead?
    /// Whether the read reports the UID: from pages 0-2 on the fast path, else from GET UID (`FF CA`).
    let readsUID: Bool
    /// Whether a fast read also asks for the tag's originality signature (READ_SIG), one more exchange.
    let readsSignature: Bool
    /// The 32-byte signature READ_SIG gave; nil when not asked, not on the fast path, or not answered.
    private(set) var signature: [UInt8]?
    /// The 8 bytes GET_VERSION gave (asked with READ_SIG: they say whose key signs); nil when not asked or answered.
    private(set) var version: [UInt8]?
    /// The tag's UID, once read.
    private(set) var uid: [UInt8]?
    /// What became of the fast attempt.
    private(set) var fastReadUse = FastReadUse.notTried
    /// The method in use for page reads; nil: READ BINARY.
    private var method: ReaderProfile.FastRead?
    /// Data-area bytes held: `buffer[i]` is data offset `bufferStart + i`.
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    private var areaSize = 0

    init(
        session: CardSession<Transport>, fastRead: ReaderProfile.FastRead? = nil, readsUID: Bool = false,
        readsSignature: Bool = false
    ) {
        self.session = session
        self.fastRead = fastRead
        self.readsUID = readsUID
        self.readsSignature = readsSignature
    }

    /// A step failed: the tag's answer (a read error), or a fast-read reply that is not usable.
    private enum Attempt: Error {
        case tag(TagReadError)
        case fast(FastRead.Failure)
    }

    private var bufferEnd: Int { bufferStart + buffer.count }

    mutating func readNDEF() throws(TagReadError) -> NDEFLookup {
        if let fastRead {
            do throws(Attempt) {
                let lookup = try readFast(fastRead)
                fastReadUse = .used
                return lookup
            } catch {
                switch error {
                case .tag(let error): throw error
                case .fast(let failure):
                    fastReadUse = .fellBack(reason: failure.reason, readerRefused: failure.readerRefused)
                }
            }
        }
        method = nil
        buffer = []
        bufferStart = 0
        if readsUID, uid == nil { uid = try session.readUID() }
        do throws(Attempt) {
            return try readPlain()
        } catch {
            switch error {
            case .tag(let error): throw error
            case .fast(let failure): throw .malformedResponse(during: "READ BINARY", reason: failure.reason)
            }
        }
    }

    private mutating func readPlain() throws(Attempt) -> NDEFLookup {
        let command = "READ BINARY pages 3-6 (FF B0 00 03 10)"
        let first = try exchange([0xFF, 0xB0, 0x00, 0x03, 0x10], command)
        guard first.isSuccess else { throw .tag(.statusWord(first.statusWord, during: command)) }
        return try start(ccAndData: first.data, command: command, shortIsMalformed: true)
    }

    /// The fast path: a Part 3 session around it when the method needs one, ended before any fallback.
    private mutating func readFast(_ fastRead: ReaderProfile.FastRead) throws(Attempt) -> NDEFLookup {
        method = fastRead
        if fastRead == .transparentSession {
            let reply = try exchangeRaw(FastRead.startSession, "start transparent session (FF C2 00 00 02 81 00)")
            if case .failure(let failure) = FastRead.parseSessionReply(reply) { throw .fast(failure) }
        }
        let result: Result<NDEFLookup, Attempt>
        do throws(Attempt) {
            let first = readsUID ? 0 : 3
            var data = try readPages(start: first, count: Self.firstFastReadEnd - first + 1)
            if readsUID {
                guard let uid = Self.uid(pages: data) else {
                    throw .fast(FastRead.Failure("pages 0-2 hold no NTAG21x UID (the check bytes do not match)"))
                }
                self.uid = uid
                data.removeFirst(12)
            }
            result = .success(
                try start(ccAndData: data, command: "FAST_READ pages \(first)-39", shortIsMalformed: false))
        } catch {
            result = .failure(error)
        }
        if readsSignature, case .success = result {
            // GET_VERSION (`60`, 8 bytes) names the product, and so the key that signs it (`NXPProduct`): always
            // asked, since the capability container cannot tell (an Ultralight EV1's is whatever its formatter
            // wrote). READ_SIG (NTAG21x and Ultralight EV1 data sheets: `3C 00`, 32 bytes). No answer to either
            // leaves the verdict unknown, not the read failed.
            version = try? passThrough([0x60], expected: 8, name: "GET_VERSION")
            signature = try? passThrough([0x3C, 0x00], expected: 32, name: "READ_SIG")
        }
        if fastRead == .transparentSession {
            if case .failure(.tag(let error)) = result, error.isCardRemoved { return try result.get() }
            // The answer does not matter: the read is complete (or falls back) either way.
            _ = try exchangeRaw(FastRead.endSession, "end transparent session (FF C2 00 00 02 82 00)")
        }
        return try result.get()
    }

    /// The 7-byte UID in pages 0-2 (NTAG21x datasheet, "UID/serial number"), or nil when a check byte is wrong.
    static func uid(pages: [UInt8]) -> [UInt8]? {
        guard pages.count >= 12 else { return nil }
        let uid = Array(pages[0..<3]) + Array(pages[4..<8])
        let bcc0 = 0x88 ^ uid[0] ^ uid[1] ^ uid[2]
        let bcc1 = uid[3] ^ uid[4] ^ uid[5] ^ uid[6]
        guard pages[3] == bcc0, pages[8] == bcc1 else { return nil }
        return uid
    }

    /// Parses the CC from the first 4 bytes and keeps the data bytes after it, then walks the TLVs.
    private mutating func start(ccAndData: [UInt8], command: String, shortIsMalformed: Bool) throws(Attempt)
        -> NDEFLookup
    {
        let cc: Type2CapabilityContainer
        switch Type2CapabilityContainer.parse(Array(ccAndData.prefix(4))) {
        case .valid(let parsed): cc = parsed
        case .notFormatted(let reason): return .none(reason: reason)
        case .invalid(let reason):
            if ccAndData.count < 4 && shortIsMalformed {
                throw .tag(.malformedResponse(during: command, reason: reason))
            }
            throw .tag(.badCapabilityContainer(reason))
        }
        areaSize = cc.dataAreaSize
        buffer = Array(ccAndData.dropFirst(4).prefix(areaSize))
        bufferStart = 0
        return try walkTLVs()
    }

    private mutating func walkTLVs() throws(Attempt) -> NDEFLookup {
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
            guard offset + 2 <= areaSize else { throw .tag(.tlvTruncated(tag: tag, offset: offset)) }
            try ensure((offset + 1)..<(offset + 2))
            var length = Int(byte(at: offset + 1))
            var valueStart = offset + 2
            if length == 0xFF {
                guard offset + 4 <= areaSize else { throw .tag(.tlvTruncated(tag: tag, offset: offset)) }
                try ensure((offset + 2)..<(offset + 4))
                length = Int(byte(at: offset + 2)) << 8 | Int(byte(at: offset + 3))
                valueStart = offset + 4
            }
            let available = areaSize - valueStart
            guard length <= available else {
                throw .tag(.tlvExceedsArea(tag: tag, offset: offset, length: length, available: available))
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
    private mutating func ensure(_ range: Range<Int>) throws(Attempt) {
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
            if let method {
                // Everything left in the area, as far as one exchange carries (the area size is a multiple of 8).
                let pages = min(FastRead.maxPages(method), (areaSize - pageOffset + 3) / 4)
                let data = try readPages(start: page, count: pages)
                buffer.append(contentsOf: data.dropFirst(skip).prefix(areaSize - bufferEnd))
                continue
            }
            let length = min(Self.maxReadLength, areaSize - pageOffset)
            let apdu: [UInt8] = [
                0xFF, 0xB0, UInt8(truncatingIfNeeded: page >> 8), UInt8(truncatingIfNeeded: page),
                UInt8(truncatingIfNeeded: length),
            ]
            func command() -> String { "READ BINARY page \(page), \(length) bytes (\(NFCHex.bytes(apdu)))" }
            let response = try exchange(apdu, command())
            guard response.isSuccess else { throw .tag(.statusWord(response.statusWord, during: command())) }
            // Never keep bytes beyond what was asked (and so beyond the area), whatever the reader sent.
            let returned = response.data.prefix(length)
            guard returned.count > skip else {
                throw .tag(.malformedResponse(during: command(), reason: "returned \(response.data.count) data bytes"))
            }
            buffer.append(contentsOf: returned.dropFirst(skip))
        }
    }

    /// One FAST_READ of `count` pages from `start` through the current method; exactly `4 * count` bytes or a
    /// `.fast` failure.
    private mutating func readPages(start: Int, count: Int) throws(Attempt) -> [UInt8] {
        let end = start + count - 1
        guard count > 0, end <= 0xFF else { throw .fast(FastRead.Failure("page \(end) is beyond FAST_READ's range")) }
        return try passThrough(
            FastRead.tagCommand(start: start, end: end), expected: 4 * count, name: "FAST_READ pages \(start)-\(end)")
    }

    /// A tag command through the current pass-through; exactly `expected` bytes back or a `.fast` failure.
    private mutating func passThrough(_ tagCommand: [UInt8], expected: Int, name: String) throws(Attempt) -> [UInt8] {
        guard let method else { throw .fast(FastRead.Failure("no fast-read method")) }
        let parsed: Result<[UInt8], FastRead.Failure>
        switch method {
        case .inCommunicateThru:
            let reply = try exchangeRaw(FastRead.inCommunicateThru(tagCommand), name)
            parsed = FastRead.parseInCommunicateThru(reply, expected: expected)
        case .transparentSession:
            let reply = try exchangeRaw(FastRead.transceive(tagCommand), name)
            parsed = FastRead.parseTransceiveReply(reply, expected: expected)
        }
        switch parsed {
        case .success(let data): return data
        case .failure(let failure):
            throw .fast(FastRead.Failure("\(name): \(failure.reason)", readerRefused: failure.readerRefused))
        }
    }

    private mutating func exchange(_ apdu: [UInt8], _ command: @autoclosure () -> String) throws(Attempt)
        -> APDUResponse
    {
        do throws(TagReadError) {
            return try session.exchange(apdu, command())
        } catch {
            throw .tag(error)
        }
    }

    /// An exchange whose raw reply the fast-read parsers check (a 0- or 1-byte reply is their failure, unless
    /// the transport said the card left).
    private mutating func exchangeRaw(_ apdu: [UInt8], _ command: @autoclosure () -> String) throws(Attempt)
        -> [UInt8]
    {
        do throws(TagReadError) {
            return try session.exchangeRaw(apdu, command())
        } catch {
            throw .tag(error)
        }
    }
}
