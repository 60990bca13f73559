import BridgeCore
import CPCSCLite
import Foundation
import Platform

/// A PC/SC call that did not return `SCARD_S_SUCCESS`: the call's name and the pcsc-lite result code.
///
/// pcsc-lite's codes import as positive 64-bit `Int`s on Linux (`LONG` is 64-bit), so they are compared as
/// such, always against pcsclite.h's own constants. The names are our own table rather than
/// `pcsc_stringify_error`, whose buffer is shared between threads in some pcsc-lite builds.
public struct PCSCError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The result code (e.g. `0x80100013`).
    public let code: Int
    /// The failing call, e.g. `SCardGetStatusChange`.
    public let function: String

    /// Creates an error for `function` returning `code`.
    public init(code: Int, function: String) {
        self.code = code
        self.function = function
    }

    /// Names for the codes this bridge meets, keyed by pcsclite.h's own constants.
    static let names: [Int: String] = [
        SCARD_F_INTERNAL_ERROR: "SCARD_F_INTERNAL_ERROR",
        SCARD_E_CANCELLED: "SCARD_E_CANCELLED",
        SCARD_E_INVALID_HANDLE: "SCARD_E_INVALID_HANDLE",
        SCARD_E_INVALID_PARAMETER: "SCARD_E_INVALID_PARAMETER",
        SCARD_E_INSUFFICIENT_BUFFER: "SCARD_E_INSUFFICIENT_BUFFER",
        SCARD_E_UNKNOWN_READER: "SCARD_E_UNKNOWN_READER",
        SCARD_E_TIMEOUT: "SCARD_E_TIMEOUT",
        SCARD_E_SHARING_VIOLATION: "SCARD_E_SHARING_VIOLATION",
        SCARD_E_NO_SMARTCARD: "SCARD_E_NO_SMARTCARD",
        SCARD_E_PROTO_MISMATCH: "SCARD_E_PROTO_MISMATCH",
        SCARD_F_COMM_ERROR: "SCARD_F_COMM_ERROR",
        SCARD_E_NOT_TRANSACTED: "SCARD_E_NOT_TRANSACTED",
        SCARD_E_READER_UNAVAILABLE: "SCARD_E_READER_UNAVAILABLE",
        SCARD_E_NO_SERVICE: "SCARD_E_NO_SERVICE",
        SCARD_E_SERVICE_STOPPED: "SCARD_E_SERVICE_STOPPED",
        SCARD_E_UNSUPPORTED_FEATURE: "SCARD_E_UNSUPPORTED_FEATURE",
        SCARD_E_NO_READERS_AVAILABLE: "SCARD_E_NO_READERS_AVAILABLE",
        SCARD_E_NO_ACCESS: "SCARD_E_NO_ACCESS",
        SCARD_W_UNRESPONSIVE_CARD: "SCARD_W_UNRESPONSIVE_CARD",
        SCARD_W_UNPOWERED_CARD: "SCARD_W_UNPOWERED_CARD",
        SCARD_W_RESET_CARD: "SCARD_W_RESET_CARD",
        SCARD_W_REMOVED_CARD: "SCARD_W_REMOVED_CARD",
        SCARD_W_SECURITY_VIOLATION: "SCARD_W_SECURITY_VIOLATION",
    ]

    /// `SCARD_E_NO_SERVICE` and friends: `SCARD_E_NO_SERVICE`, `SCARD_E_SERVICE_STOPPED`.
    public var name: String { PCSCError.names[code] ?? "0x" + String(UInt32(truncatingIfNeeded: code), radix: 16) }

    /// What a card leaving mid-APDU gives: `SCARD_W_REMOVED_CARD`, `SCARD_E_NO_SMARTCARD`,
    /// `SCARD_E_NOT_TRANSACTED`.
    var isRemoval: Bool {
        [SCARD_W_REMOVED_CARD, SCARD_E_NO_SMARTCARD, SCARD_E_NOT_TRANSACTED].contains(code)
    }

    /// True when the card left the reader, was never there or does not answer: nothing to retry until the
    /// next tap.
    var isCardGone: Bool {
        [
            SCARD_W_REMOVED_CARD, SCARD_E_NO_SMARTCARD, SCARD_E_NOT_TRANSACTED, SCARD_W_RESET_CARD,
            SCARD_W_UNPOWERED_CARD, SCARD_W_UNRESPONSIVE_CARD,
        ].contains(code)
    }

    /// True when the reader vanished between listing and use: re-list.
    var isReaderGone: Bool { code == SCARD_E_UNKNOWN_READER || code == SCARD_E_READER_UNAVAILABLE }

    public var description: String { "\(function): \(name)" }
}

/// Flag bits of `dwEventState` (the lower 16 bits; the upper 16 are pcsc-lite's per-reader event counter).
enum ReaderFlags {
    static let changed = UInt(SCARD_STATE_CHANGED)
    static let unknown = UInt(SCARD_STATE_UNKNOWN)
    static let unavailable = UInt(SCARD_STATE_UNAVAILABLE)
    static let empty = UInt(SCARD_STATE_EMPTY)
    static let present = UInt(SCARD_STATE_PRESENT)
    static let mute = UInt(SCARD_STATE_MUTE)
    /// Not a pcsclite.h constant: the flags' half of `dwEventState`.
    static let mask: UInt = 0xFFFF
}

/// One reader's state as `SCardGetStatusChange` reports it.
struct ReaderStatus {
    /// The reader name, or `\\?PnP?\Notification`.
    var name: String
    /// What we last saw (fed back as `dwCurrentState` so the call blocks until something differs).
    var current: UInt
    /// What pcscd reports now, `CHANGED` included.
    var event: UInt = 0
    /// The card's ATR from the last call.
    var atr: [UInt8] = []

    /// The flag bits without the event counter.
    var flags: UInt { event & ReaderFlags.mask }
    /// pcsc-lite's event counter: it moves on every insertion and removal.
    var counter: UInt { (event >> 16) & 0xFFFF }
    /// A card is on the reader and answered the power-up.
    var cardPresent: Bool { flags & ReaderFlags.present != 0 && flags & ReaderFlags.mute == 0 }
}

/// A PC/SC context: one connection to pcscd. Used by one thread at a time, except `cancel(handle:)`, which
/// pcsc-lite allows from any thread to unblock a pending `SCardGetStatusChange`.
final class PCSCContext {
    /// The pseudo-reader whose state changes when readers come and go; it works with zero readers attached.
    static let plugAndPlay = "\\\\?PnP?\\Notification"
    static let infinite: UInt = 0xFFFF_FFFF
    static let scopeSystem: UInt = 0x0002
    static let shareShared: UInt = 0x0002
    static let shareDirect: UInt = 0x0003
    static let protocolT0: UInt = 0x0001
    static let protocolT1: UInt = 0x0002
    static let leaveCard: UInt = 0x0000

    let handle: Int
    private var released = false

    private init(handle: Int) {
        self.handle = handle
    }

    /// Connects to pcscd. Fails with `SCARD_E_NO_SERVICE` (sometimes `SCARD_W_SECURITY_VIOLATION`) while
    /// pcscd is absent.
    static func establish() throws(PCSCError) -> PCSCContext {
        var handle: SCARDCONTEXT = 0
        let rv = WorkerActivity.waiting { SCardEstablishContext(DWORD(scopeSystem), nil, nil, &handle) }
        guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardEstablishContext") }
        return PCSCContext(handle: Int(handle))
    }

    /// Unblocks a `SCardGetStatusChange` on the context `handle` (it returns `SCARD_E_CANCELLED`).
    @discardableResult
    static func cancel(handle: Int) -> Int {
        Int(SCardCancel(SCARDCONTEXT(handle)))
    }

    func release() {
        guard !released else { return }
        released = true
        _ = SCardReleaseContext(SCARDCONTEXT(handle))
    }

    deinit { release() }

    /// Every reader pcscd knows, in its order; none is an empty list, not an error. The buffer is sized by a
    /// first call (`SCARD_AUTOALLOCATE` does not import); a reader added between the two calls is retried.
    func listReaders() throws(PCSCError) -> [String] {
        for _ in 0..<3 {
            var size: DWORD = 0
            var rv = WorkerActivity.waiting { SCardListReaders(SCARDCONTEXT(handle), nil, nil, &size) }
            if rv == SCARD_E_NO_READERS_AVAILABLE { return [] }
            guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardListReaders") }
            var buffer = [CChar](repeating: 0, count: Int(size) + 1)
            rv = WorkerActivity.waiting { SCardListReaders(SCARDCONTEXT(handle), nil, &buffer, &size) }
            if rv == SCARD_E_NO_READERS_AVAILABLE { return [] }
            if rv == SCARD_E_INSUFFICIENT_BUFFER { continue }
            guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardListReaders") }
            let used = min(Int(size), buffer.count)
            return buffer[0..<used].split(separator: 0).map { chunk in
                String(decoding: chunk.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
        throw PCSCError(code: SCARD_E_INSUFFICIENT_BUFFER, function: "SCardListReaders")
    }

    /// Blocks until one of `states` differs from its `current` value (or `timeout` ms pass), then fills in
    /// `event` and `atr`.
    func getStatusChange(_ states: inout [ReaderStatus], timeout: UInt) throws(PCSCError) {
        // The C structs point at C strings that must outlive the call.
        let names = states.map { strdup($0.name) }
        defer { for name in names { free(name) } }
        var raw = [SCARD_READERSTATE](repeating: SCARD_READERSTATE(), count: states.count)
        for index in states.indices {
            raw[index].szReader = UnsafePointer(names[index])
            raw[index].dwCurrentState = DWORD(states[index].current)
        }
        let rv = WorkerActivity.waiting {
            SCardGetStatusChange(SCARDCONTEXT(handle), DWORD(timeout), &raw, DWORD(raw.count))
        }
        guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardGetStatusChange") }
        for index in states.indices {
            states[index].event = UInt(raw[index].dwEventState)
            let count = min(Int(raw[index].cbAtr), 33)
            states[index].atr = withUnsafeBytes(of: raw[index].rgbAtr) { Array($0.prefix(count)) }
        }
    }

    /// Connects to the card on `reader` in shared mode, T=0 or T=1; `direct`: to the reader itself, card or not
    /// (`SCARD_SHARE_DIRECT`, for `SCardControl` escapes).
    func connect(reader: String, direct: Bool = false) throws(PCSCError) -> PCSCCard {
        var card: SCARDHANDLE = 0
        var active: DWORD = 0
        let rv = WorkerActivity.waiting {
            SCardConnect(
                SCARDCONTEXT(handle), reader, DWORD(direct ? PCSCContext.shareDirect : PCSCContext.shareShared),
                DWORD(direct ? 0 : PCSCContext.protocolT0 | PCSCContext.protocolT1), &card, &active)
        }
        guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardConnect") }
        return PCSCCard(handle: Int(card), activeProtocol: UInt(active))
    }
}

/// A connection to the card on one reader. Every PC/SC call is a wait on pcscd (and the reader behind it): the
/// watchdog does not count it as work (`WorkerActivity`), since restarting the bridge would not unblock pcscd.
final class PCSCCard {
    let handle: Int
    let activeProtocol: UInt
    private var connected = true

    init(handle: Int, activeProtocol: UInt) {
        self.handle = handle
        self.activeProtocol = activeProtocol
    }

    /// Sends `apdu`, returns the raw response (data and SW1 SW2). The protocol header is built from the
    /// protocol the connect negotiated, because `SCARD_PCI_T0`/`T1` do not import into Swift.
    func transmit(_ apdu: [UInt8]) throws(PCSCError) -> [UInt8] {
        var request = SCARD_IO_REQUEST(
            dwProtocol: activeProtocol, cbPciLength: UInt(MemoryLayout<SCARD_IO_REQUEST>.size))
        var response = [UInt8](repeating: 0, count: 264)
        var length = DWORD(response.count)
        let rv = WorkerActivity.waiting {
            apdu.withUnsafeBufferPointer { send in
                SCardTransmit(
                    SCARDHANDLE(handle), &request, send.baseAddress, DWORD(send.count), nil, &response, &length)
            }
        }
        guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardTransmit") }
        return Array(response.prefix(min(Int(length), response.count)))
    }

    /// Sends an escape command to the reader with `SCardControl(code)`; returns the reply.
    func control(code: UInt32, _ command: [UInt8]) throws(PCSCError) -> [UInt8] {
        var response = [UInt8](repeating: 0, count: 264)
        var length: DWORD = 0
        let rv = WorkerActivity.waiting {
            command.withUnsafeBufferPointer { send in
                response.withUnsafeMutableBufferPointer { receive in
                    SCardControl(
                        SCARDHANDLE(handle), DWORD(code), send.baseAddress, DWORD(send.count), receive.baseAddress,
                        DWORD(receive.count), &length)
                }
            }
        }
        guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardControl") }
        return Array(response.prefix(min(Int(length), response.count)))
    }

    /// A reader attribute with `SCardGetAttrib` (`SCARD_ATTR_CHANNEL_ID`...); its bytes as the driver gave them.
    func attribute(_ id: UInt32) throws(PCSCError) -> [UInt8] {
        var value = [UInt8](repeating: 0, count: 64)
        var length = DWORD(value.count)
        let rv = WorkerActivity.waiting {
            value.withUnsafeMutableBufferPointer {
                SCardGetAttrib(SCARDHANDLE(handle), DWORD(id), $0.baseAddress, &length)
            }
        }
        guard rv == SCARD_S_SUCCESS else { throw PCSCError(code: Int(rv), function: "SCardGetAttrib") }
        return Array(value.prefix(min(Int(length), value.count)))
    }

    /// `SCARD_ATTR_CHANNEL_ID` (pcsc-lite's reader.h: class 2, communications, tag 0x0110); the header builds it
    /// with a macro that does not import into Swift.
    static let channelIDAttribute: UInt32 = 0x0002_0110

    /// Disconnects and leaves the card as it is (no reset, no power-down: the next tap starts clean anyway).
    func disconnect() {
        guard connected else { return }
        connected = false
        _ = WorkerActivity.waiting { SCardDisconnect(SCARDHANDLE(handle), DWORD(PCSCContext.leaveCard)) }
    }

    deinit { disconnect() }
}

/// `CardTransport` over `SCardTransmit`, with the time spent waiting on the card measured for the benchmark.
///
/// `SCARD_W_REMOVED_CARD`, `SCARD_E_NO_SMARTCARD` and `SCARD_E_NOT_TRANSACTED` (what a card leaving mid-APDU
/// gives, after a 0-byte "success") are `.cardRemoved`; a response shorter than 2 bytes is left to the tag
/// reader, which treats it as a removal too.
final class PCSCTransport: CardTransport {
    let card: PCSCCard
    /// Seconds spent inside `SCardTransmit`.
    private(set) var transmitSeconds = 0.0
    /// APDUs sent, failed ones included.
    private(set) var count = 0

    init(card: PCSCCard) {
        self.card = card
    }

    func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        count += 1
        let start = MonotonicClock.now()
        defer { transmitSeconds += MonotonicClock.now() - start }
        do {
            return try card.transmit(apdu)
        } catch {
            if error.isRemoval { throw .cardRemoved }
            throw .failed(error.description)
        }
    }
}
