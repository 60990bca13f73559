import BridgeCore

/// JSON parser (config files, API replies): parse, and what parses must re-encode and parse to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let value = try? JSONParser.parse(bytes) {
        let again = try? JSONParser.parse(value.encoded())
        precondition(again == value, "JSON round trip changed the value")
    }
    return 0
}
