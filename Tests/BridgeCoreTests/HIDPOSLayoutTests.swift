import BridgeTestSupport
import Testing

@testable import BridgeCore

/// The HID POS layout and code assembly against a scanner described from outside the code: the descriptor of
/// `HIDPOSScanner` (HID 1.11 items, HID POS usage ids) and reports laid out as the vendors' manuals give them.
struct HIDPOSLayoutTests {
    static func layout(_ bytes: [UInt8] = HIDPOSScanner.descriptor) throws -> HIDPOSLayout {
        try HIDPOSLayout.find(in: HIDReportDescriptor.parse(bytes).get()).get()
    }

    @Test func theLayoutIsWhereTheManualsPutIt() throws {
        let layout = try Self.layout()
        // Report ID 2; after it: byte 0 the count, bytes 1-3 the AIM identifier, bytes 4-59 the data, byte 62 bit 0
        // continued (the manuals' bytes 1, 2-4, 5-60 and 63, counted with the report ID byte as byte 0).
        #expect(layout.reportID == 2 && layout.reportLength == 63 && layout.maximumInputLength == 64)
        #expect(layout.byteCount == .init(offset: 0, size: 8))
        #expect(layout.symbology.map(\.offset) == [8, 16, 24])
        #expect(layout.data == .init(offset: 32, size: 56 * 8))
        #expect(layout.continued == .init(offset: 62 * 8, size: 1))
        // The Trigger Report's output bits: report 4, one byte.
        #expect(layout.errorBeep?.report == HIDPOSScanner.errorBeep)
        #expect(layout.goodReadBeep?.report == HIDPOSScanner.goodReadBeep)
        #expect(layout.goodReadLED == nil)
    }

    @Test func aVendorInterfaceAndAKeyboardAreNotScanners() throws {
        let vendor = HIDPOSLayout.find(in: try HIDReportDescriptor.parse(HIDPOSScanner.vendorInterface).get())
        #expect(vendor.failure?.description.contains("0xFF8C") == true)
        let keyboard = HIDPOSLayout.find(in: try HIDReportDescriptor.parse(HIDReportDescriptorTests.bootKeyboard).get())
        #expect(keyboard.failure?.description.contains("usage page 0x0001") == true)
        // A Bar Code Scanner collection whose only report is a trigger: no Scanned Data Report.
        let trigger: [UInt8] = [
            0x05, 0x8C, 0x09, 0x02, 0xA1, 0x01, 0x85, 0x04, 0x75, 0x08, 0x95, 0x01, 0x09, 0x60, 0x91, 0x02, 0xC0,
        ]
        let noData = HIDPOSLayout.find(in: try HIDReportDescriptor.parse(trigger).get())
        #expect(noData.failure?.description.contains("without a Scanned Data Report") == true)
    }

    @Test func oneReportIsOneCodeByteExactWithItsSymbology() throws {
        var assembler = HIDPOSAssembler(layout: try Self.layout())
        // A GS1 code with its GS separator (0x1D) and a NUL inside: both kept, the count says where it ends.
        let gs1: [UInt8] = Array("0104012345678901".utf8) + [0x1D] + Array("10AB".utf8) + [0x00] + Array("C".utf8)
        let outputs = assembler.feed(HIDPOSScanner.reports(gs1, aim: "]C1")[0], now: 0)
        #expect(outputs == [.code(gs1, symbology: "]C1")])
    }

    @Test func aLongCodeIsPutTogetherFromItsReports() throws {
        var assembler = HIDPOSAssembler(layout: try Self.layout())
        let url =
            Array("https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJ&p=4.2.3.3.6&cp=K7&x=".utf8)
            + Array(repeating: 0x61, count: 80)
        let reports = HIDPOSScanner.reports(url)
        #expect(reports.count == 3)
        #expect(assembler.feed(reports[0], now: 0).isEmpty && assembler.feed(reports[1], now: 0.01).isEmpty)
        #expect(assembler.pendingDeadline() != nil)
        #expect(assembler.feed(reports[2], now: 0.02) == [.code(url, symbology: "]Q1")])
        #expect(assembler.pendingDeadline() == nil)
    }

    @Test func otherReportsAreNotCodesAndBrokenOnesSayWhy() throws {
        var assembler = HIDPOSAssembler(layout: try Self.layout())
        // An unknown report ID (a vendor's status) is passed over, even in the middle of a code.
        let parts = HIDPOSScanner.reports(Array(repeating: 0x41, count: 60))
        #expect(assembler.feed(parts[0], now: 0).isEmpty)
        #expect(assembler.feed([0x07, 0x01, 0x02], now: 0).isEmpty)
        #expect(assembler.feed(parts[1], now: 0) == [.code(Array(repeating: 0x41, count: 60), symbology: "]Q1")])
        // A truncated report: discarded, with the code it belonged to.
        #expect(assembler.feed(parts[0], now: 1).isEmpty)
        let cut = assembler.feed(Array(parts[1].prefix(20)), now: 1)
        #expect(
            cut.count == 1 && cut[0].reason?.contains("19 bytes") == true && cut[0].reason?.contains("56 bytes") == true
        )
        // A byte count larger than the field.
        var bad = HIDPOSScanner.reports(Array("x".utf8))[0]
        bad[1] = 57
        #expect(assembler.feed(bad, now: 2).first?.reason?.contains("byte count of 57") == true)
        // No AIM identifier (zeros): no symbology.
        #expect(
            assembler.feed(HIDPOSScanner.reports(Array("42".utf8), aim: "")[0], now: 3) == [
                .code(Array("42".utf8), symbology: nil)
            ])
        #expect(assembler.feed(HIDPOSScanner.reports([])[0], now: 4).first?.reason == "an empty scanned data report")
    }

    @Test func anUnfinishedCodeIsGivenUpAfterItsTimeout() throws {
        var assembler = HIDPOSAssembler(layout: try Self.layout(), continuationTimeout: 1)
        let parts = HIDPOSScanner.reports(Array(repeating: 0x42, count: 100))
        #expect(assembler.feed(parts[0], now: 10).isEmpty)
        #expect(assembler.tick(now: 10.5) == nil)
        #expect(assembler.tick(now: 11)?.reason?.contains("56 bytes") == true)
        // The next code starts clean.
        #expect(
            assembler.feed(HIDPOSScanner.reports(Array("7".utf8))[0], now: 12) == [
                .code(Array("7".utf8), symbology: "]Q1")
            ])
        // And a late continuation is not glued to a stale start.
        #expect(assembler.feed(parts[0], now: 20).isEmpty)
        let late = assembler.feed(parts[1], now: 25)
        #expect(late.count == 2 && late[0].reason != nil)
        #expect(late[1] == .code(Array(repeating: 0x42, count: 44), symbology: "]Q1"))
    }

    @Test func aCodeLongerThanTheBoundIsDiscardedWhole() throws {
        var assembler = HIDPOSAssembler(layout: try Self.layout(), maxLength: 100)
        let parts = HIDPOSScanner.reports(Array(repeating: 0x43, count: 150))
        #expect(assembler.feed(parts[0], now: 0).isEmpty && assembler.feed(parts[1], now: 0).isEmpty)
        #expect(assembler.feed(parts[2], now: 0) == [.discarded("a code longer than 100 bytes")])
        #expect(
            assembler.feed(HIDPOSScanner.reports(Array("ok".utf8))[0], now: 0) == [
                .code(Array("ok".utf8), symbology: "]Q1")
            ])
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

extension HIDPOSAssembler.Output {
    var reason: String? {
        if case .discarded(let reason) = self { return reason }
        return nil
    }
}
