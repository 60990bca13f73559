import BridgeCore

/// A card whose every answer comes from the fuzz input: each response is a length byte followed by that many
/// bytes (status word included). Runs out: the card was removed.
public struct ScriptedCard: CardTransport {
    public var script: [UInt8]
    public var offset = 0

    public init(script: [UInt8]) { self.script = script }

    public mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        guard offset < script.count else { throw .cardRemoved }
        let length = Int(script[offset])
        offset += 1
        let end = min(script.count, offset + length)
        defer { offset = end }
        return Array(script[offset..<end])
    }
}
