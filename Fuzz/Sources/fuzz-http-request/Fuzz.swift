import BridgeCore

/// What the local interface reads from a request in Swift, after libmicrohttpd parsed it: the sign-in form's body
/// (`FormURLEncoded`), the Host header (`HTTPAccessPolicy.hostName`), a session cookie (`fromHex`) and an event
/// position (`ServerSentEvents.sequence`). The input goes to each; besides no trap:
/// - the form decoder gives back any text a browser encodes (every byte percent-encoded, then a space as `+`);
/// - a host name is a piece of the header, never holds `@`, `/` or whitespace, and counts as loopback only when
///   it is one of the loopback names;
/// - a cookie's bytes give back its hex; a position is the whole number its digits say.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)

    _ = FormURLEncoded.value(of: "token", in: bytes)
    // Encoded as the URL Standard's application/x-www-form-urlencoded serializer does, then decoded.
    var body = Array("token=".utf8)
    for byte in Array(text.utf8) {
        if byte == UInt8(ascii: " ") {
            body.append(UInt8(ascii: "+"))
        } else {
            let digits = Array("0123456789ABCDEF".utf8)
            body += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
        }
    }
    body += Array("&other=x".utf8)
    precondition(FormURLEncoded.value(of: "token", in: body) == text, "the form decoder lost text")

    if let host = HTTPAccessPolicy.hostName(text) {
        precondition(text.contains(host), "a host that is not in the header")
        precondition(!host.contains { $0 == "@" || $0 == "/" || $0.isWhitespace }, "a host with @, / or a space")
        if HTTPAccessPolicy.isLoopbackHost(text) { precondition(LoopbackHost.contains(host)) }
    } else {
        precondition(!HTTPAccessPolicy.isLoopbackHost(text), "loopback without a host name")
    }

    if let id = HTTPAccessPolicy.fromHex(text) {
        let hex = id.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        precondition(hex.joined() == text.lowercased(), "a cookie's bytes are not its hex")
    }
    if let position = ServerSentEvents.sequence(text) {
        precondition(position >= 0 && Int(text) == position, "a position that is not its digits")
    }
    return 0
}
