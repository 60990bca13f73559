import BridgeCore

/// Plings URL parser: any bytes (as a scanner line or NDEF URI) must give an identifier or a reason.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    switch PlingsURLParser(hosts: ["s.plings.io", "q.example.org"]).parse(text) {
    case .success(let id):
        // A parsed identifier always builds a valid input that parses back as JSON.
        let json = ResolveIdentifierInput.build(id, time: .init(timeIntervalSince1970: 0), fix: nil).encoded()
        precondition((try? JSONParser.parse(json)) != nil, "input JSON does not parse back")
    case .failure(let reason):
        precondition(!reason.description.isEmpty)
    }
    return 0
}
