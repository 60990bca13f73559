/// One read's APDU exchanges: counts them, caps them, and turns transport failures into `TagReadError`.
struct CardSession<Transport: CardTransport> {
    var transport: Transport
    let limit: Int
    private(set) var count = 0

    init(transport: Transport, limit: Int) {
        self.transport = transport
        self.limit = max(1, limit)
    }

    /// Sends `apdu`; `command` names it in errors (built only when one is thrown). A response under
    /// 2 bytes means the card was removed.
    mutating func exchange(_ apdu: [UInt8], _ command: @autoclosure () -> String) throws(TagReadError)
        -> APDUResponse
    {
        let raw = try exchangeRaw(apdu, command())
        guard let response = APDUResponse(raw: raw) else { throw .cardRemoved(during: command()) }
        return response
    }

    /// Sends `apdu` and returns the raw reply, at least 2 bytes (shorter: the card was removed).
    mutating func exchangeRaw(_ apdu: [UInt8], _ command: @autoclosure () -> String) throws(TagReadError)
        -> [UInt8]
    {
        guard count < limit else { throw .tooManyCommands(limit: limit) }
        count += 1
        let raw: [UInt8]
        do throws(CardTransportError) {
            raw = try transport.transmit(apdu)
        } catch {
            switch error {
            case .cardRemoved: throw .cardRemoved(during: command())
            case .failed(let reason): throw .transportFailed(during: command(), reason: reason)
            }
        }
        guard raw.count >= 2 else { throw .cardRemoved(during: command()) }
        return raw
    }

    /// Reads the UID with `FF CA 00 00 00`. A status word other than 9000 or an empty UID gives nil:
    /// the UID is a convenience for the spool, not worth failing a read over. Transport errors still throw.
    mutating func readUID() throws(TagReadError) -> [UInt8]? {
        let response = try exchange([0xFF, 0xCA, 0x00, 0x00, 0x00], "GET UID (FF CA 00 00 00)")
        guard response.isSuccess, !response.data.isEmpty else { return nil }
        return response.data
    }
}
