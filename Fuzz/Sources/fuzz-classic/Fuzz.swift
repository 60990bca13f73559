import BridgeCore
import FuzzSupport

/// MIFARE Classic NDEF reading (the MAD, its CRC, the application IDs, the sectors' TLVs) against a card whose
/// every answer comes from the fuzz input: each response is a length byte followed by that many bytes (status
/// word included), so authentications, MAD blocks and data blocks are all attacker-made. A 4K, so MAD2 is read.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var card = ScriptedCard(script: Array(UnsafeBufferPointer(start: data, count: size)))
    if let result = try? TagReader.read(kind: .mifareClassic(name: "MIFARE Classic 4K"), transport: &card) {
        precondition(result.apduCount <= TagReadOptions().maxAPDUs)
        precondition(result.ndef != nil || result.noURLReason != nil)
    }
    return 0
}
