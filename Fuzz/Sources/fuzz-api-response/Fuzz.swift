import BridgeCore

/// The API response classifier: first two bytes are the HTTP status, the next byte the Retry-After length,
/// the rest header and body. Every answer maps to one outcome of design 2.3; the same answer to a batched request
/// (docs/contracts.md, "Batched request") of 1 to 30 scans maps to one outcome per scan, or one for all.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size >= 3 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let status = 100 + (Int(bytes[0]) << 8 | Int(bytes[1])) % 500
    let headerLength = min(Int(bytes[2]) % 16, size - 3)
    let header = String(decoding: bytes[3..<(3 + headerLength)], as: UTF8.self)
    let body = Array(bytes[(3 + headerLength)...])
    let outcome = DeliveryClassifier.classify(status: status, retryAfterHeader: header, body: body, location: header)
    switch outcome {
    case .delivered(let response): precondition((200..<300).contains(status) && response.utf8.count <= 2052)
    case .dead(let reason, _), .authPaused(let reason): precondition(!reason.isEmpty)
    case .redirected(let reason): precondition((300..<400).contains(status) && !reason.isEmpty)
    case .retry(let reason, let after): precondition(!reason.isEmpty && (after ?? 0) >= 0)
    }
    let count = 1 + Int(bytes[2]) % 30
    switch DeliveryClassifier.classifyBatch(
        status: status, retryAfterHeader: header, body: body, location: header, count: count)
    {
    case .each(let outcomes): precondition(outcomes.count == count && (200..<300).contains(status))
    case .refused(let reason): precondition(!reason.isEmpty)
    case .whole(let outcome): precondition(outcome.reason?.isEmpty == false)
    }
    return 0
}
