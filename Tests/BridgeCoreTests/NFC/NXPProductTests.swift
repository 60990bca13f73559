import Testing

@testable import BridgeCore

// GET_VERSION answers from NXP's data sheets ("GET_VERSION response": fixed header 00, vendor 04, product type 04
// NTAG or 03 Ultralight, subtype, major and minor version, storage size, protocol type 03).
@Suite struct NXPProductTests {
    @Test func theDataSheetsAnswersNameTheProductAndItsKey() {
        let cases: [([UInt8], String, NXPProduct.SignatureKey?)] = [
            ([0x00, 0x04, 0x04, 0x01, 0x01, 0x00, 0x0B, 0x03], "NTAG210", .ntag21x),
            ([0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03], "NTAG213", .ntag21x),
            ([0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x11, 0x03], "NTAG215", .ntag21x),
            ([0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x13, 0x03], "NTAG216", .ntag21x),
            ([0x00, 0x04, 0x03, 0x01, 0x01, 0x00, 0x0B, 0x03], "MIFARE Ultralight EV1 (MF0UL11)", .ultralightEV1),
            ([0x00, 0x04, 0x03, 0x02, 0x01, 0x00, 0x0E, 0x03], "MIFARE Ultralight EV1 (MF0ULH21)", .ultralightEV1),
            ([0x00, 0x04, 0x04, 0x05, 0x02, 0x02, 0x15, 0x03], "NTAG I2C plus 2k (NT3H2211)", nil),
        ]
        for (version, name, key) in cases {
            let product = NXPProduct.identify(version: version)
            #expect(product?.name == name && product?.signatureKey == key, "\(version)")
        }
    }

    @Test func anUnlistedNXPProductIsNamedByItsBytesWithoutAKeyAndAnythingElseIsNone() {
        let unlisted = NXPProduct.identify(version: [0x00, 0x04, 0x03, 0x01, 0x04, 0x00, 0x0F, 0x03])
        #expect(unlisted?.name == "NXP product 0004030104000F03" && unlisted?.signatureKey == nil)
        #expect(NXPProduct.identify(version: nil) == nil)
        #expect(NXPProduct.identify(version: [0x00, 0x05, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03]) == nil, "not NXP")
        #expect(NXPProduct.identify(version: [0x00, 0x04, 0x04]) == nil)
    }
}
