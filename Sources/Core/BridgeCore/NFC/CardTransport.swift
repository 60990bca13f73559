/// Sends one APDU to the card on a reader and returns its raw response (data followed by SW1 SW2).
///
/// The requirement is `mutating` so an in-memory test tag can be a plain struct that records what it
/// received; a PC/SC implementation that holds a card handle can be a struct or a class (a class
/// satisfies a `mutating` requirement with an ordinary method). The tag reader takes the transport
/// `inout` and hands it back, log included, whatever the outcome.
///
/// Implementations map their failures to `CardTransportError`: PC/SC `SCARD_W_REMOVED_CARD`,
/// `SCARD_E_NO_SMARTCARD` and `SCARD_E_NOT_TRANSACTED` are `.cardRemoved`; anything else is `.failed`.
/// A response shorter than 2 bytes needs no mapping: the reader treats it as a removed card, because
/// that is what a real reader returns (a 0-byte "success") when the card leaves mid-APDU.
public protocol CardTransport {
    /// Transmits `apdu` and returns the response including SW1 SW2.
    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8]
}

/// Why an APDU exchange failed below the card's own answer.
public enum CardTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The card left the field.
    case cardRemoved
    /// Any other transport failure, with a one-line reason (e.g. the PC/SC error name and code).
    case failed(String)

    public var description: String {
        switch self {
        case .cardRemoved: return "card removed"
        case .failed(let reason): return reason
        }
    }
}

/// A card's answer to one APDU: the data and the status word SW1 SW2.
public struct APDUResponse: Sendable, Equatable {
    /// The response data, without the status word.
    public var data: [UInt8]
    /// SW1 SW2 as one number (0x9000 is success).
    public var statusWord: UInt16

    /// Creates a response from its parts.
    public init(data: [UInt8], statusWord: UInt16) {
        self.data = data
        self.statusWord = statusWord
    }

    /// Splits a raw response; nil when it is shorter than the 2-byte status word.
    public init?(raw: [UInt8]) {
        guard raw.count >= 2 else { return nil }
        data = Array(raw[0..<(raw.count - 2)])
        statusWord = UInt16(raw[raw.count - 2]) << 8 | UInt16(raw[raw.count - 1])
    }

    /// True for 9000.
    public var isSuccess: Bool { statusWord == 0x9000 }
}
