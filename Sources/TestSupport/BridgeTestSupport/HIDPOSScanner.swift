/// A HID POS barcode scanner as the tests know it from outside the code under test: a report descriptor written
/// item by item from the HID 1.11 encoding (section 6.2.2) and the HID POS Usage Tables (page 0x8C), shaped like
/// the POS interface of a Honeywell scanner in "HID POS" mode; and its reports laid out as the vendors' manuals give
/// them (Access-IS, Honeywell): report ID 2; byte 1 the length of the data; bytes 2-4 the AIM identifier; bytes
/// 5-60 the data, zero-padded; bytes 61-62 vendor bytes; byte 63 bit 0 "Decode Data Continued".
public enum HIDPOSScanner {
    /// The POS interface's report descriptor.
    public static let descriptor: [UInt8] = [
        0x05, 0x8C,  // Usage Page (Bar Code Scanner)
        0x09, 0x02,  // Usage (Bar Code Scanner)
        0xA1, 0x01,  // Collection (Application)
        0x09, 0x12,  //   Usage (Scanned Data Report)
        0xA1, 0x02,  //   Collection (Logical)
        0x85, 0x02,  //     Report ID (2)
        0x15, 0x00,  //     Logical Minimum (0)
        0x26, 0xFF, 0x00,  //     Logical Maximum (255)
        0x75, 0x08,  //     Report Size (8)
        0x95, 0x01,  //     Report Count (1)
        0x05, 0x01,  //     Usage Page (Generic Desktop)
        0x09, 0x3B,  //     Usage (Byte Count)
        0x81, 0x02,  //     Input (Data, Variable, Absolute)
        0x95, 0x03,  //     Report Count (3)
        0x05, 0x8C,  //     Usage Page (Bar Code Scanner)
        0x09, 0xFB,  //     Usage (Symbology Identifier 1)
        0x09, 0xFC,  //     Usage (Symbology Identifier 2)
        0x09, 0xFD,  //     Usage (Symbology Identifier 3)
        0x81, 0x02,  //     Input (Data, Variable, Absolute)
        0x95, 0x38,  //     Report Count (56)
        0x09, 0xFE,  //     Usage (Decoded Data)
        0x82, 0x02, 0x01,  //     Input (Data, Variable, Absolute, Buffered Bytes)
        0x06, 0x66, 0xFF,  //     Usage Page (vendor defined 0xFF66)
        0x95, 0x02,  //     Report Count (2)
        0x09, 0x04,  //     Usage (vendor 4)
        0x09, 0x00,  //     Usage (vendor 0)
        0x81, 0x02,  //     Input (Data, Variable, Absolute)
        0x05, 0x8C,  //     Usage Page (Bar Code Scanner)
        0x25, 0x01,  //     Logical Maximum (1)
        0x75, 0x01,  //     Report Size (1)
        0x95, 0x08,  //     Report Count (8)
        0x09, 0xFF,  //     Usage (Decode Data Continued)
        0x81, 0x02,  //     Input (Data, Variable, Absolute)
        0xC0,  //   End Collection
        0x09, 0x14,  //   Usage (Trigger Report)
        0xA1, 0x02,  //   Collection (Logical)
        0x85, 0x04,  //     Report ID (4)
        0x15, 0x00,  //     Logical Minimum (0)
        0x25, 0x01,  //     Logical Maximum (1)
        0x75, 0x01,  //     Report Size (1)
        0x95, 0x08,  //     Report Count (8)
        0x09, 0x00,  //     Usage (Undefined)
        0x09, 0x5F,  //     Usage (Prevent Read of Barcodes)
        0x09, 0x60,  //     Usage (Initiate Barcode Read)
        0x09, 0x00,  //     Usage (Undefined)
        0x09, 0x00,  //     Usage (Undefined)
        0x09, 0x85,  //     Usage (Sound Error Beep)
        0x09, 0x86,  //     Usage (Sound Good Read Beep)
        0x91, 0x86,  //     Output (Data, Variable, Relative, Volatile)
        0xC0,  //   End Collection
        0xC0,  // End Collection
    ]

    /// The same scanner's second, vendor-defined interface (usage page 0xFF8C): not a Bar Code Scanner collection.
    public static let vendorInterface: [UInt8] = [
        0x06, 0x8C, 0xFF,  // Usage Page (vendor defined 0xFF8C)
        0x09, 0x01,  // Usage (1)
        0xA1, 0x01,  // Collection (Application)
        0x85, 0xFD,  //   Report ID (253)
        0x75, 0x08, 0x95, 0x3F,  //   Report Size (8), Report Count (63)
        0x09, 0x01, 0x81, 0x02,  //   Usage (1), Input
        0xC0,  // End Collection
    ]

    /// The output report that sounds the error beep: report ID 4, the seventh usage listed (Sound Error Beep, the
    /// sixth, is bit 5; Sound Good Read Beep bit 6).
    public static let errorBeep: [UInt8] = [0x04, 1 << 5]
    public static let goodReadBeep: [UInt8] = [0x04, 1 << 6]

    /// The Scanned Data Reports of one code: 56 data bytes each, every one but the last marked continued; the AIM
    /// identifier in each (scanners repeat it).
    public static func reports(_ data: [UInt8], aim: String = "]Q1") -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var rest = data[...]
        repeat {
            chunks.append(Array(rest.prefix(56)))
            rest = rest.dropFirst(56)
        } while !rest.isEmpty
        return chunks.enumerated().map { index, chunk in
            var report = [UInt8](repeating: 0, count: 64)
            report[0] = 0x02
            report[1] = UInt8(chunk.count)
            for (offset, byte) in Array(aim.utf8).prefix(3).enumerated() { report[2 + offset] = byte }
            for (offset, byte) in chunk.enumerated() { report[5 + offset] = byte }
            if index < chunks.count - 1 { report[63] = 0x01 }
            return report
        }
    }
}
