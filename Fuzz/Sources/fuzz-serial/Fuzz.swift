import Serial

/// The serial framer: any bytes, cut into reads at data-dependent points and fed at growing times, under every
/// suffix, with and without the STX prefix. A code is never longer than the maximum and never holds its own
/// suffix byte; nothing crashes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let suffixes = SerialFramer.Suffix.allCases
    let suffix = suffixes[Int(bytes[0]) % suffixes.count]
    let prefix: UInt8? = bytes[0] & 0x80 == 0 ? nil : 0x02
    let maxLength = 1 + Int(bytes[1] % 64)
    var framer = SerialFramer(suffix: suffix, prefix: prefix, maxLength: maxLength, interByteTimeout: 0.2)
    let forbidden: UInt8? = [.cr: 0x0D, .lf: 0x0A, .crlf: 0x0A, .etx: 0x03, .tab: 0x09][suffix]
    let check: (SerialFramer.Output) -> Void = { output in
        guard case .code(let code) = output else { return }
        precondition(!code.isEmpty && code.count <= maxLength, "code of \(code.count) bytes, maximum \(maxLength)")
        if let forbidden { precondition(!code.contains(forbidden), "a code holds its suffix byte") }
    }
    var start = 2
    var now = 0.0
    while start < size {
        // A read of 1-16 bytes; the byte before it says how long the pause before it was.
        let length = min(size - start, 1 + Int(bytes[start - 1] % 16))
        now += Double(bytes[start - 1] % 4) * 0.1
        framer.feed(bytes[start..<(start + length)], now: now, emit: check)
        start += length
    }
    if let last = framer.tick(now: now + 1) { check(last) }
    return 0
}
