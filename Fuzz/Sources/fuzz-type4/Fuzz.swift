import BridgeCore
import FuzzSupport

/// Type 4 reading against a card whose every answer comes from the fuzz input: each response is a length
/// byte followed by that many bytes (status word included), so SELECTs, CC and NLEN are all attacker-made.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var card = ScriptedCard(script: Array(UnsafeBufferPointer(start: data, count: size)))
    if let result = try? TagReader.read(kind: .type4, transport: &card) {
        precondition(result.apduCount <= TagReadOptions().maxAPDUs)
    }
    return 0
}
