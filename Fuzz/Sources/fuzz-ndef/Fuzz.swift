import BridgeCore

/// NDEF message parser and URI extraction (records, Smart Posters, nesting).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let records = try? NDEFParser.parseMessage(bytes) {
        _ = NDEFURI.uris(in: records)
        // Whatever parsed must encode and parse back to the same records.
        let again = try? NDEFParser.parseMessage(NDEFMessage.encode(records))
        precondition(again == records, "NDEF round trip changed the records")
    }
    return 0
}
