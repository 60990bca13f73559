import BridgeCore

/// Type 2 tag reading (CC check, TLV walk) against a tag whose memory is the fuzz input. The first byte
/// picks how many bytes the "reader" returns per read (1-16), as real readers differ.
struct MemoryTag: CardTransport {
    var memory: [UInt8]
    var bytesPerRead: Int
    var declaredEnd: Int

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        if apdu.starts(with: [0xFF, 0xCA]) { return [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x90, 0x00] }
        guard apdu.count == 5, apdu[0] == 0xFF, apdu[1] == 0xB0 else { return [0x6D, 0x00] }
        let start = (Int(apdu[2]) << 8 | Int(apdu[3])) * 4
        // Never read past the area the CC declared (plus the header pages).
        precondition(start < max(declaredEnd, 32), "read started past the declared area")
        let length = min(Int(apdu[4] == 0 ? 16 : apdu[4]), bytesPerRead)
        guard start < memory.count else { return [0x63, 0x00] }
        return Array(memory[start..<min(memory.count, start + length)]) + [0x90, 0x00]
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Pages 0-2 (UID, lock), then the fuzz input from page 3 (CC) on.
    let memory = [UInt8](repeating: 0, count: 12) + bytes.dropFirst()
    let declaredEnd = memory.count > 14 ? 16 + Int(memory[14]) * 8 : 16
    var tag = MemoryTag(memory: memory, bytesPerRead: 1 + Int(bytes[0] % 16), declaredEnd: declaredEnd)
    if let result = try? TagReader.read(kind: .type2(name: "fuzz"), transport: &tag) {
        precondition(result.apduCount <= TagReadOptions().maxAPDUs)
    }
    return 0
}
