import BridgeCore

/// The fast-read reply parsers (PN533 InCommunicateThru, PC/SC Part 3 TLVs) and the Type 2 read around them.
///
/// The tag holds a known Plings URL; every pass-through answer is the fuzz input. Properties: nothing traps; a
/// parser's success has exactly the bytes asked for; and a read that fell back to READ BINARY gives the tag's
/// true URL (a reply that is not exactly the asked shape never becomes a URL).
struct PassThroughTag: CardTransport {
    var memory: [UInt8]
    var reply: [UInt8]

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        if apdu.starts(with: [0xFF, 0xCA]) { return [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x90, 0x00] }
        if apdu.starts(with: [0xFF, 0xB0]), apdu.count == 5 {
            let start = (Int(apdu[2]) << 8 | Int(apdu[3])) * 4
            guard start < memory.count else { return [0x63, 0x00] }
            let length = Int(apdu[4] == 0 ? 16 : apdu[4])
            return Array(memory[start..<min(memory.count, start + length)]) + [0x90, 0x00]
        }
        return reply
    }
}

let url = "https://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"
let tagMemory: [UInt8] = {
    let payload = NDEFURI.encodePayload(url)
    let record: [UInt8] = [0xD1, 0x01, UInt8(payload.count), 0x55] + payload
    let data = [0x03, UInt8(record.count)] + record + [0xFE]
    var memory: [UInt8] = [
        0x04, 0x11, 0x22, 0xBF, 0x33, 0x44, 0x55, 0x66, 0x00, 0x48, 0x00, 0x00, 0xE1, 0x10, 0x12, 0x00,
    ]
    memory += data + [UInt8](repeating: 0, count: 144 - data.count)
    return memory + [UInt8](repeating: 0, count: 20)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let reply = Array(bytes.dropFirst())
    let expected = Int(bytes[0])
    if case .success(let got) = FastRead.parseInCommunicateThru(reply, expected: expected) {
        precondition(got.count == expected)
    }
    if case .success(let got) = FastRead.parseTransceiveReply(reply, expected: expected) {
        precondition(got.count == expected)
    }
    _ = FastRead.parseSessionReply(reply)
    let method: ReaderProfile.FastRead = bytes[0] & 1 == 0 ? .inCommunicateThru : .transparentSession
    var tag = PassThroughTag(memory: tagMemory, reply: reply)
    if let result = try? TagReader.read(
        kind: .type2(name: "fuzz"), transport: &tag, options: TagReadOptions(fastRead: method))
    {
        if case .fellBack = result.fastRead { precondition(result.uri == url, "a fallback read gave another URL") }
    }
    return 0
}
