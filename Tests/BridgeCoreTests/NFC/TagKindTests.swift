import Testing
@testable import BridgeCore

@Suite("Tag kind from ATR")
struct NFCTagKindTests {
    /// A PC/SC part 3 storage-card ATR with standard byte `ss` and card name `name`.
    func storageATR(_ ss: UInt8, _ name: UInt16) -> [UInt8] {
        var atr: [UInt8] = [
            0x3B, 0x8F, 0x80, 0x01, 0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06,
            ss, UInt8(name >> 8), UInt8(name & 0xFF), 0x00, 0x00, 0x00, 0x00,
        ]
        atr.append(atr.dropFirst().reduce(0, ^))
        return atr
    }

    @Test("storage cards by card name")
    func storageCards() {
        #expect(storageATR(0x03, 0x0003) == nfcUltralightATR)
        #expect(TagKind.from(atr: nfcUltralightATR) == .type2(name: "NTAG/Ultralight"))
        #expect(TagKind.from(atr: nfcUltralightATR).description == "NTAG/Ultralight (Type 2)")
        #expect(TagKind.from(atr: storageATR(0x03, 0x003A)) == .type2(name: "MIFARE Ultralight C"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x003D)) == .type2(name: "MIFARE Ultralight EV1"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0001)) == .mifareClassic(name: "MIFARE Classic 1K"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0002)) == .mifareClassic(name: "MIFARE Classic 4K"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0026)) == .mifareClassic(name: "MIFARE Mini"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0036)) == .mifareClassic(name: "MIFARE Plus SL1 2K"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0001)).description == "MIFARE Classic 1K (MIFARE Classic NDEF)")
    }

    @Test("unknown ISO 14443 A names are Type 2 candidates; ISO 15693 is Type 5; other standards are unsupported")
    func conservative() {
        #expect(TagKind.from(atr: storageATR(0x03, 0x0000)) == .type2(name: "ISO 14443 A tag (card name 0x0000)"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0099)) == .type2(name: "ISO 14443 A tag (card name 0x0099)"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x0027)) == .type2(name: "my-d move (SLE 66R01P)"))
        #expect(TagKind.from(atr: storageATR(0x03, 0x002F)) == .unsupported(name: "Jewel Tag (ISO 14443 A part 3)"))
        #expect(TagKind.from(atr: storageATR(0x11, 0x003B)) == .unsupported(name: "FeliCa (FeliCa)"))
        #expect(TagKind.from(atr: storageATR(0x0B, 0x0014)) == .type5(name: "ICODESLI"))
        #expect(TagKind.from(atr: storageATR(0x0C, 0x0099)) == .type5(name: "ISO 15693 tag (card name 0x0099)"))
        #expect(TagKind.from(atr: storageATR(0x42, 0x0099)).code == "unsupported")
        #expect(TagKind.from(atr: storageATR(0x0B, 0x0014)).description == "ICODESLI (Type 5)")
    }

    @Test("anything else is ISO-DEP (Type 4)")
    func isoDEP() {
        #expect(TagKind.from(atr: [0x3B, 0x81, 0x80, 0x01, 0x80, 0x80]) == .type4)  // DESFire on ACR122U
        #expect(TagKind.from(atr: [0x3B, 0x80, 0x80, 0x01, 0x01]) == .type4)  // phone (HCE)
        #expect(TagKind.from(atr: []) == .type4)
        #expect(TagKind.from(atr: [0x3B]) == .type4)
        #expect(TagKind.type4.description == "ISO-DEP (Type 4)")
        #expect(TagKind.type4.code == "type4")
    }

    @Test("a storage ATR cut short after the marker is not guessed at")
    func truncated() {
        let cut = Array(nfcUltralightATR.prefix(13))
        #expect(TagKind.from(atr: cut).code == "unsupported")
        #expect(StorageCardATR.parse(cut) == nil)
        #expect(StorageCardATR.parse(nfcUltralightATR) == StorageCardATR(standard: 0x03, cardName: 0x0003))
    }
}
