import Testing

@testable import BridgeCore

/// The descriptor parser against Device Class Definition for HID 1.11: Appendix B.1, the boot keyboard's report
/// descriptor and the report layout the appendix gives for it (modifier byte, reserved byte, six key codes in;
/// five LED bits and three padding bits out), and the item encoding of section 6.2.2.
struct HIDReportDescriptorTests {
    /// HID 1.11 Appendix B.1 (and E.6), byte for byte.
    static let bootKeyboard: [UInt8] = [
        0x05, 0x01, 0x09, 0x06, 0xA1, 0x01, 0x05, 0x07, 0x19, 0xE0, 0x29, 0xE7, 0x15, 0x00, 0x25, 0x01, 0x75, 0x01,
        0x95, 0x08, 0x81, 0x02, 0x95, 0x01, 0x75, 0x08, 0x81, 0x01, 0x95, 0x05, 0x75, 0x01, 0x05, 0x08, 0x19, 0x01,
        0x29, 0x05, 0x91, 0x02, 0x95, 0x01, 0x75, 0x03, 0x91, 0x01, 0x95, 0x06, 0x75, 0x08, 0x15, 0x00, 0x25, 0x65,
        0x05, 0x07, 0x19, 0x00, 0x29, 0x65, 0x81, 0x00, 0xC0,
    ]

    @Test func theBootKeyboardHasTheLayoutTheSpecificationGives() throws {
        let descriptor = try HIDReportDescriptor.parse(Self.bootKeyboard).get()
        #expect(descriptor.applications == [.init(kind: 1, usagePage: 0x01, usage: 0x06)])
        let input = descriptor.fields(.input, reportID: 0)
        #expect(input.map(\.bitOffset) == [0, 8, 16])
        #expect(input.map(\.bitCount) == [8, 8, 48])
        // Byte 0: the eight modifiers, Left Control (0xE0) to Right GUI (0xE7) of the Keyboard page, variable.
        #expect(input[0].usages == Array(0x0007_00E0...0x0007_00E7) && input[0].isVariable && !input[0].isConstant)
        // Byte 1: reserved (constant). Bytes 2-7: an array of key codes 0-101.
        #expect(input[1].isConstant)
        #expect(!input[2].isVariable && input[2].usages.count == 0x66 && input[2].logicalMaximum == 0x65)
        let output = descriptor.fields(.output, reportID: 0)
        // Five LEDs (LED page 0x08, usages 1-5), then three bits of padding: one byte.
        #expect(output.map(\.bitOffset) == [0, 5] && output.map(\.bitCount) == [5, 3])
        #expect(output[0].usagePage == 0x08 && output[0].usages == Array(0x0008_0001...0x0008_0005))
        #expect(output[1].isConstant)
        #expect(input.allSatisfy { $0.collections == [.init(kind: 1, usagePage: 0x01, usage: 0x06)] })
    }

    @Test func reportIDsKeepTheirOwnOffsetsAndPushPopRestoresTheGlobals() throws {
        // Section 6.2.2.7: Report ID 1 with 8 bits, Report ID 2 with 16 bits; Push/Pop around a change of Report Size.
        let bytes: [UInt8] = [
            0x05, 0x8C, 0x09, 0x02, 0xA1, 0x01,  // Bar Code Scanner page, application collection
            0x85, 0x01, 0x75, 0x08, 0x95, 0x01, 0x09, 0xFB, 0x81, 0x02,  // ID 1: one byte
            0xA4, 0x75, 0x01, 0x95, 0x01, 0x09, 0xFF, 0x81, 0x02, 0xB4,  // push, one bit, pop
            0x85, 0x02, 0x95, 0x02, 0x09, 0xFE, 0x82, 0x02, 0x01,  // ID 2: two bytes, buffered bytes (2-byte data)
            0xC0,
        ]
        let descriptor = try HIDReportDescriptor.parse(bytes).get()
        let one = descriptor.fields(.input, reportID: 1)
        #expect(one.map(\.bitOffset) == [0, 8] && one.map(\.bitCount) == [8, 1])
        #expect(one.map(\.usages) == [[0x008C_00FB], [0x008C_00FF]])
        let two = descriptor.fields(.input, reportID: 2)
        // Pop restored Report Size 8: two 8-bit items from the start of report 2.
        #expect(two.map(\.bitOffset) == [0] && two.map(\.bitCount) == [16])
        #expect(two[0].isBufferedBytes && two[0].usages == [0x008C_00FE])
        #expect(descriptor.applications == [.init(kind: 1, usagePage: 0x8C, usage: 0x02)])
    }

    @Test func brokenDescriptorsAreFailuresWithTheirOffset() {
        let cases: [([UInt8], String)] = [
            ([0x05], "cut short"),
            ([0xC0], "End Collection without a collection"),
            ([0xB4], "Pop without a Push"),
            ([0x85, 0x00], "report ID 0"),
            ([0xFE, 0x05, 0x00, 0x01], "long item cut short"),
        ]
        for (bytes, reason) in cases {
            guard case .failure(let failure) = HIDReportDescriptor.parse(bytes) else {
                Issue.record("accepted \(bytes)")
                continue
            }
            #expect(failure.reason.contains(reason), "\(failure)")
            #expect(failure.offset == 0)
        }
        #expect((try? HIDReportDescriptor.parse([UInt8](repeating: 0, count: 4097)).get()) == nil)
        // Report Size and Report Count of 0xFFFFFFFF each (4-byte items, section 6.2.2.7): their product does not
        // fit a 64-bit integer; the Input item after them is refused, not a crash (found by fuzz-hid-descriptor).
        let huge: [UInt8] = [0x77, 0xFF, 0xFF, 0xFF, 0xFF, 0x97, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x02]
        guard case .failure(let failure) = HIDReportDescriptor.parse(huge) else {
            Issue.record("accepted a field of 2^64 bits")
            return
        }
        #expect(failure.offset == 10 && failure.reason.contains("4294967295 items of 4294967295 bits"))
    }
}
