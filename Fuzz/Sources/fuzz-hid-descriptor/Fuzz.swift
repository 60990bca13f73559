import BridgeCore

/// The HID report descriptor parser (sysfs `report_descriptor` of any device) and the HID POS code assembler
/// (reports from any device that calls itself a scanner).
/// - Input starting 0xA5: the rest is a stream of reports (each a length byte, then that many bytes) for a scanner
///   whose descriptor has the manuals' layout; every code is at most the assembler's bound, every feed gives at
///   most two outputs, and an unfinished code always has a deadline.
/// - Anything else is a descriptor: a descriptor or a failure with an offset inside it; every field's bits lie
///   inside a report of at most 64 KiB; when it is a scanner's, the descriptor's own bytes are fed as reports.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if bytes.first == 0xA5 {
        guard case .success(let descriptor) = HIDReportDescriptor.parse(scanner),
            case .success(let layout) = HIDPOSLayout.find(in: descriptor)
        else { preconditionFailure("the scanner's descriptor is not a scanner's") }
        var assembler = HIDPOSAssembler(layout: layout, maxLength: 200)
        var index = 1
        var now = 0.0
        while index < bytes.count {
            let length = Int(bytes[index])
            let report = Array(bytes[(index + 1)..<min(bytes.count, index + 1 + length)])
            index += 1 + length
            now += 0.25
            check(assembler.feed(report, now: now), bound: 200)
            if assembler.pendingDeadline() == nil, let late = assembler.tick(now: now + 10) {
                preconditionFailure("a tick without a pending code gave \(late)")
            }
        }
        return 0
    }
    switch HIDReportDescriptor.parse(bytes) {
    case .success(let descriptor):
        for field in descriptor.fields {
            precondition(field.bitOffset >= 0 && field.bitCount >= 0, "negative field")
            precondition(field.usages.count <= 65_536 * 64, "usages unbounded")
        }
        if case .success(let layout) = HIDPOSLayout.find(in: descriptor) {
            var assembler = HIDPOSAssembler(layout: layout, maxLength: 100)
            for (offset, chunk) in stride(from: 0, to: bytes.count, by: 16).map({ ($0, bytes[$0...]) }) {
                check(assembler.feed([layout.reportID] + chunk, now: Double(offset)), bound: 100)
            }
            for bit in [layout.errorBeep, layout.goodReadBeep, layout.goodReadLED].compactMap({ $0 }) {
                precondition(bit.report.count == bit.length + (bit.reportID == 0 ? 0 : 1), "output report length")
            }
        }
    case .failure(let failure):
        precondition(failure.offset <= max(size, HIDReportDescriptor.maximumSize), "offset outside the input")
    }
    return 0
}

func check(_ outputs: [HIDPOSAssembler.Output], bound: Int) {
    precondition(outputs.count <= 2, "more than two outputs from one report")
    for case .code(let code, let symbology) in outputs {
        precondition(!code.isEmpty && code.count <= bound, "a code of \(code.count) bytes")
        precondition(symbology.map { $0.utf8.count == 3 && $0.hasPrefix("]") } ?? true, "symbology \(symbology!)")
    }
}

/// A scanner's POS interface as the manuals lay it out (report 2: count, AIM identifier, 56 data bytes, 2 vendor
/// bytes, continued flag; report 4: beeper bits).
let scanner: [UInt8] = [
    0x05, 0x8C, 0x09, 0x02, 0xA1, 0x01, 0x09, 0x12, 0xA1, 0x02, 0x85, 0x02, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08,
    0x95, 0x01, 0x05, 0x01, 0x09, 0x3B, 0x81, 0x02, 0x95, 0x03, 0x05, 0x8C, 0x09, 0xFB, 0x09, 0xFC, 0x09, 0xFD, 0x81,
    0x02, 0x95, 0x38, 0x09, 0xFE, 0x82, 0x02, 0x01, 0x06, 0x66, 0xFF, 0x95, 0x02, 0x09, 0x04, 0x09, 0x00, 0x81, 0x02,
    0x05, 0x8C, 0x25, 0x01, 0x75, 0x01, 0x95, 0x08, 0x09, 0xFF, 0x81, 0x02, 0xC0, 0x09, 0x14, 0xA1, 0x02, 0x85, 0x04,
    0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x08, 0x09, 0x00, 0x09, 0x5F, 0x09, 0x60, 0x09, 0x00, 0x09, 0x00, 0x09,
    0x85, 0x09, 0x86, 0x91, 0x86, 0xC0, 0xC0,
]
