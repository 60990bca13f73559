import BridgeCore

/// Type 4 reading against a card whose every answer comes from the fuzz input: each response is a length
/// byte followed by that many bytes (status word included), so SELECTs, CC and NLEN are all attacker-made.
struct ScriptedCard: CardTransport {
    var script: [UInt8]
    var offset = 0

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        guard offset < script.count else { throw .cardRemoved }
        let length = Int(script[offset])
        offset += 1
        let end = min(script.count, offset + length)
        defer { offset = end }
        return Array(script[offset..<end])
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var card = ScriptedCard(script: Array(UnsafeBufferPointer(start: data, count: size)))
    if let result = try? TagReader.read(kind: .type4, transport: &card) {
        precondition(result.apduCount <= TagReadOptions().maxAPDUs)
    }
    return 0
}
