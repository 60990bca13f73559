import BridgeCore

/// The HID report descriptor parser (sysfs `report_descriptor` of any device): a descriptor or a failure with an
/// offset inside it; every field's bits lie inside a report of at most 64 KiB; nothing crashes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    switch HIDReportDescriptor.parse(bytes) {
    case .success(let descriptor):
        for field in descriptor.fields {
            precondition(field.bitOffset >= 0 && field.bitCount >= 0, "negative field")
            precondition(field.usages.count <= 65_536 * 64, "usages unbounded")
        }
    case .failure(let failure):
        precondition(failure.offset <= max(size, HIDReportDescriptor.maximumSize), "offset outside the input")
    }
    return 0
}
