import BridgeCore
import HID

/// Layouts with dead keys, AltGr, Caps Lock quirks and none of them, compiled from xkb-data once.
let layouts = ["us", "se", "de", "gb", "fr", "de(nodeadkeys)", "us(intl)", "ch(fr)", "cz", "pl"].compactMap {
    try? XKBLayouts.layout($0)
}

/// The evdev stream decoder: raw bytes as read(2) returns them (any split), through the parser and the
/// keystroke decoder on several xkb layouts. Lines never exceed the configured maximum.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let raw = UnsafeRawBufferPointer(start: data, count: size)
    guard !layouts.isEmpty else { fatalError("xkb-data: no layout compiles") }
    let layout = layouts[Int(raw[0]) % layouts.count]
    var parser = InputEventParser()
    var decoder = KeystrokeDecoder(
        layout: layout, suffix: raw[0] & 0x80 == 0 ? .enter : .tab, maxLineLength: 64, interKeyTimeout: 0.5)
    // Feed in two chunks split at a data-dependent point, as a short read would.
    let split = size > 2 ? 1 + Int(raw[1]) % (size - 1) : size
    for chunk in [
        UnsafeRawBufferPointer(rebasing: raw[1..<max(1, split)]),
        UnsafeRawBufferPointer(rebasing: raw[max(1, split)...]),
    ] {
        parser.parse(chunk) { event in
            decoder.feed(event, now: event.time) { output in
                if case .line(let line) = output { precondition(line.count <= 64, "line longer than the maximum") }
            }
        }
    }
    _ = decoder.tick(now: 1e12)
    return 0
}
