import BridgeCore
import FuzzSupport

/// NFC Forum Type 5 reading (the CC at block 0, 4 or 8 bytes, the T5T_Area's TLVs, n-block reads and the fallback
/// to single blocks) against a card whose every answer comes from the fuzz input (`ScriptedCard`): block 0's length
/// sets the block size, so every size from 1 to 32 bytes and every CC is attacker-made.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var card = RecordingCard(inner: ScriptedCard(script: Array(UnsafeBufferPointer(start: data, count: size))))
    var options = TagReadOptions()
    options.readsISO15693 = true
    let result = try? TagReader.read(kind: .type5(name: "ISO 15693 tag"), transport: &card, options: options)
    if let result {
        precondition(result.apduCount <= options.maxAPDUs)
        precondition(result.ndef != nil || result.noURLReason != nil)
    }
    // Every read asks for at most 128 bytes and never goes back: each starts where the reads before it ended, at a
    // later block (the walk stepped over a TLV that is not the message, by its length), or re-reads the block a
    // refused n-block read asked for. The skip never leaves the area the CC declares.
    // Block 0's answer (less its status word) is the block size.
    guard let first = card.reads.first, first.answer >= 3 else { return 0 }
    let blockSize = first.answer - 2
    var next = 0
    var previous = 0
    for (apdu, _) in card.reads {
        let block = Int(apdu[2]) << 8 | Int(apdu[3])
        precondition(apdu[4] <= 128)
        precondition(block >= previous, "a read went back")
        previous = block
        next = max(next, block + max(1, Int(apdu[4]) / blockSize))
    }
    return 0
}

/// Passes every exchange to `inner` and keeps the READ BINARY commands with their answers' lengths.
struct RecordingCard: CardTransport {
    var inner: ScriptedCard
    var reads: [(apdu: [UInt8], answer: Int)] = []

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        let answer = try inner.transmit(apdu)
        if apdu.count == 5, apdu[0] == 0xFF, apdu[1] == 0xB0 { reads.append((apdu, answer.count)) }
        return answer
    }
}
