import Testing
@testable import BridgeCore

@Suite("Type 2 tag reads")
struct NFCType2TagReaderTests {
    let plingsMessage = NDEFMessage.encode([.uri(nfcPlingsURL)])

    @Test("a Plings URL on NTAG213 takes exactly 5 APDUs")
    func minimalAPDUs() throws {
        #expect(plingsMessage.count == 56)
        var tag = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.uri == nfcPlingsURL)
        #expect(result.uris == [nfcPlingsURL])
        #expect(result.noURLReason == nil)
        #expect(result.ndef == plingsMessage)
        #expect(result.uid == [0x04, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0x80])
        #expect(result.uidHex == "04A1B2C3D4E580")
        #expect(result.kind == .type2(name: "NTAG/Ultralight"))
        #expect(result.apduCount == 5)
        #expect(
            tag.log == [
                [0xFF, 0xCA, 0x00, 0x00, 0x00],
                [0xFF, 0xB0, 0x00, 0x03, 0x10],
                [0xFF, 0xB0, 0x00, 0x07, 0x10],
                [0xFF, 0xB0, 0x00, 0x0B, 0x10],
                [0xFF, 0xB0, 0x00, 0x0F, 0x10],
            ])
    }

    @Test("a reader that returns 4 bytes per read still gets the URL")
    func fourBytesPerRead() throws {
        var tag = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        tag.maxBytesPerRead = 4
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.uri == nfcPlingsURL)
        // UID, CC (4 bytes only), then 58 TLV bytes at 4 bytes a read.
        #expect(result.apduCount == 2 + 15)
        #expect(tag.readsOutsideDeclaredArea.isEmpty)
    }

    @Test("a message filling the whole area ends with a short read, never past the area")
    func neverPastArea() throws {
        let uri = "https://s.plings.io/?x=" + String(repeating: "a", count: 122)
        let message = NDEFMessage.encode([.uri(uri)])
        #expect(message.count == 142)
        var tag = FakeType2Tag.ntag213(data: [0x03, 142] + message)
        let result = try TagReader.read(kind: .type2(name: "t"), transport: &tag)
        #expect(result.uri == uri)
        #expect(result.apduCount == 11)
        #expect(tag.log.last == [0xFF, 0xB0, 0x00, 0x27, 0x04])
        #expect(tag.readsOutsideDeclaredArea.isEmpty)
        #expect(!tag.log.contains { $0.count == 5 && $0[1] == 0xB0 && $0[3] >= 40 })
    }

    @Test("Lock Control, Memory Control, NULL and proprietary TLVs are skipped")
    func controlTLVs() throws {
        let data: [UInt8] =
            [
                0x01, 0x03, 0xA0, 0x0C, 0x34, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00,
                0xFD, 0x02, 0x12, 0x34,
            ] + nfcNDEFTLV(plingsMessage)
        var tag = FakeType2Tag.ntag213(data: data)
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.uri == nfcPlingsURL)
        #expect(tag.readsOutsideDeclaredArea.isEmpty)
    }

    @Test("NDEF TLV with a 3-byte length")
    func threeByteLength() throws {
        let uri = "https://s.plings.io/?t=n&i=" + String(repeating: "z", count: 300)
        let message = NDEFMessage.encode([.text("title"), .uri(uri)])
        #expect(message.count > 254)
        var tag = FakeType2Tag.image(cc: [0xE1, 0x10, 0x3E, 0x00], data: nfcNDEFTLV(message), pages: 135)
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.ndef == message)
        #expect(result.uris == [uri])
        #expect(tag.readsOutsideDeclaredArea.isEmpty)
    }

    @Test("a long skipped TLV is jumped over without reading it; pages above 255 use P1")
    func skipWithoutReading() throws {
        let data: [UInt8] =
            [0xFD, 0xFF, 0x04, 0x00] + [UInt8](repeating: 0x77, count: 1024) + nfcNDEFTLV(plingsMessage)
        var tag = FakeType2Tag.image(cc: [0xE1, 0x10, 0xFF, 0x00], data: data, pages: 4 + 510 + 2)
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.uri == nfcPlingsURL)
        // NDEF TLV at data offset 1028 = page 261 = 0x0105.
        #expect(
            tag.log == [
                [0xFF, 0xCA, 0x00, 0x00, 0x00],
                [0xFF, 0xB0, 0x00, 0x03, 0x10],
                [0xFF, 0xB0, 0x01, 0x05, 0x10],
                [0xFF, 0xB0, 0x01, 0x09, 0x10],
                [0xFF, 0xB0, 0x01, 0x0D, 0x10],
                [0xFF, 0xB0, 0x01, 0x11, 0x10],
            ])
    }

    @Test("truncated TLV headers at the end of the area are errors")
    func truncatedTLV() {
        var tag = FakeType2Tag.ntag213(data: [UInt8](repeating: 0, count: 143) + [0x03])
        #expect(
            nfcReadError(atr: nfcUltralightATR, &tag)
                == .tlvTruncated(tag: 0x03, offset: 143))
        #expect(tag.readsOutsideDeclaredArea.isEmpty)
        var tag2 = FakeType2Tag.ntag213(data: [UInt8](repeating: 0, count: 142) + [0x03, 0xFF])
        #expect(
            nfcReadError(atr: nfcUltralightATR, &tag2)
                == .tlvTruncated(tag: 0x03, offset: 142))
        #expect(tag2.readsOutsideDeclaredArea.isEmpty)
    }

    @Test("a TLV longer than the declared area is an error, found before reading on")
    func tlvLongerThanArea() {
        var tag = FakeType2Tag.ntag213(data: [0x03, 200] + plingsMessage)
        let error = nfcReadError(atr: nfcUltralightATR, &tag)
        #expect(error == .tlvExceedsArea(tag: 0x03, offset: 0, length: 200, available: 142))
        #expect(error?.description == "NDEF TLV at data offset 0 declares 200 bytes but the data area has 142 left")
        #expect(tag.log.count == 2)
        var tag2 = FakeType2Tag.ntag213(data: [0x03, 0xFF, 0x10, 0x00])
        #expect(
            nfcReadError(atr: nfcUltralightATR, &tag2)
                == .tlvExceedsArea(tag: 0x03, offset: 0, length: 4096, available: 140))
        var tag3 = FakeType2Tag.ntag213(data: [0x01, 0xF0])
        #expect(
            nfcReadError(atr: nfcUltralightATR, &tag3)
                == .tlvExceedsArea(tag: 0x01, offset: 0, length: 240, available: 142))
    }

    @Test("blank tags are results with a reason, not errors")
    func blankTags() throws {
        var zeros = FakeType2Tag.ntag213(data: [])
        let empty = try TagReader.read(atr: nfcUltralightATR, transport: &zeros)
        #expect(empty.ndef == nil && empty.uris.isEmpty && empty.uid != nil)
        #expect(empty.noURLReason == "no NDEF TLV in the 144-byte data area")
        #expect(empty.apduCount == 11)
        #expect(zeros.readsOutsideDeclaredArea.isEmpty)

        var terminated = FakeType2Tag.ntag213(data: [0xFE])
        let term = try TagReader.read(atr: nfcUltralightATR, transport: &terminated)
        #expect(term.ndef == nil && term.apduCount == 2)
        #expect(term.noURLReason?.contains("terminator") == true)

        var emptyMessage = FakeType2Tag.ntag213(data: [0x03, 0x00, 0xFE])
        let emptyNDEF = try TagReader.read(atr: nfcUltralightATR, transport: &emptyMessage)
        #expect(emptyNDEF.ndef == [] && emptyNDEF.noURLReason == "empty NDEF message")

        var unformatted = FakeType2Tag.image(cc: [0, 0, 0, 0], data: [], pages: 16)
        let blank = try TagReader.read(atr: nfcUltralightATR, transport: &unformatted)
        #expect(blank.ndef == nil && blank.apduCount == 2)
        #expect(blank.noURLReason?.hasPrefix("blank tag") == true)
    }

    @Test("a CC with the wrong magic is an unformatted tag; a bad E1 CC is an error")
    func capabilityContainer() {
        var wrongMagic = FakeType2Tag.image(cc: [0x12, 0x10, 0x12, 0x00], data: nfcNDEFTLV(plingsMessage), pages: 45)
        let result = try? TagReader.read(atr: nfcUltralightATR, transport: &wrongMagic)
        #expect(result?.noURLReason == "not NDEF formatted: CC magic 0x12, expected 0xE1")
        #expect(result?.apduCount == 2)
        for (cc, fragment) in [
            ([0xE1, 0x20, 0x12, 0x00], "version 2.0"), ([0xE1, 0x10, 0x00, 0x00], "size is 0"),
            ([0xE1, 0x10, 0x12, 0x80], "read access"),
        ] as [([UInt8], String)] {
            var tag = FakeType2Tag.image(cc: cc, data: nfcNDEFTLV(plingsMessage), pages: 45)
            let error = nfcReadError(atr: nfcUltralightATR, &tag)
            guard case .badCapabilityContainer(let reason) = error else {
                Issue.record("expected bad CC for \(cc), got \(String(describing: error))")
                continue
            }
            #expect(reason.contains(fragment))
        }
    }

    @Test("a tiny declared area keeps only its own bytes from the first read")
    func tinyArea() throws {
        var tag = FakeType2Tag.image(
            cc: [0xE1, 0x10, 0x01, 0x00],
            data: [
                0x03, 0x03, 0xD0, 0x00, 0x00, 0xFE, 0, 0,
                0x03, 0x05,
            ], pages: 16)
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.ndef == [0xD0, 0x00, 0x00])
        #expect(result.records == [NDEFRecord(tnf: 0, type: [], payload: [])])
        #expect(result.noURLReason == "NDEF message has no URI record (1 record: TNF 0 type (none))")
        #expect(result.apduCount == 2)
    }

    @Test("text-only tags and invalid NDEF")
    func noURIAndInvalid() throws {
        var text = FakeType2Tag.ntag213(data: nfcNDEFTLV(NDEFMessage.encode([.text("hello")])))
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &text)
        #expect(result.uris.isEmpty && result.records.count == 1)
        #expect(result.noURLReason == "NDEF message has no URI record (1 record: TNF 1 type T)")

        var broken = FakeType2Tag.ntag213(data: [0x03, 0x03, 0xD1, 0x01, 0x30, 0xFE])
        #expect(
            nfcReadError(atr: nfcUltralightATR, &broken)
                == .invalidNDEF(.recordOverrunsMessage(record: 0, by: 49)))
    }

    @Test("card removed mid-read (0-byte response), transport failure, garbage status word")
    func faults() {
        var removed = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        removed.faults.removeAtAPDU = 3
        let error = nfcReadError(atr: nfcUltralightATR, &removed)
        #expect(error?.isCardRemoved == true)
        #expect(error?.description == "card removed during READ BINARY page 11, 16 bytes (FF B0 00 0B 10)")
        #expect(removed.log.count == 4)

        var failing = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        failing.faults.failAtAPDU = 1
        #expect(
            nfcReadError(atr: nfcUltralightATR, &failing)
                == .transportFailed(
                    during: "READ BINARY pages 3-6 (FF B0 00 03 10)",
                    reason: "SCARD_E_COMM_DATA_LOST (0x8010002F)"))

        var garbage = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        garbage.faults.statusWordAtAPDU[2] = 0x6300
        let swError = nfcReadError(atr: nfcUltralightATR, &garbage)
        #expect(swError == .statusWord(0x6300, during: "READ BINARY page 7, 16 bytes (FF B0 00 07 10)"))
        #expect(swError?.description == "status word 6300 for READ BINARY page 7, 16 bytes (FF B0 00 07 10)")
    }

    @Test("a reader answering 9000 with no data cannot loop")
    func emptyReads() {
        var tag = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        tag.emptyReads = true
        let error = nfcReadError(atr: nfcUltralightATR, &tag)
        guard case .malformedResponse = error else {
            Issue.record("expected malformedResponse, got \(String(describing: error))")
            return
        }
        #expect(tag.log.count == 2)
    }

    @Test("the APDU cap stops a read")
    func apduCap() {
        var tag = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        let error = nfcReadError { () throws(TagReadError) in
            try TagReader.read(atr: nfcUltralightATR, transport: &tag, options: TagReadOptions(maxAPDUs: 3))
        }
        #expect(error == .tooManyCommands(limit: 3))
        #expect(tag.log.count == 3)
    }

    @Test("a failed UID read is not fatal; UID can be skipped")
    func uid() throws {
        var tag = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        tag.uidStatusWord = 0x6A81
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.uid == nil && result.uidHex == nil && result.uri == nfcPlingsURL)
        var noUID = FakeType2Tag.ntag213(data: nfcNDEFTLV(plingsMessage))
        let options = TagReadOptions(readUID: false)
        let skipped = try TagReader.read(atr: nfcUltralightATR, transport: &noUID, options: options)
        #expect(skipped.apduCount == 4 && skipped.uid == nil)
    }

    @Test("MIFARE Classic and unsupported cards give their UID and a reason")
    func unsupportedKinds() throws {
        var tag = FakeType2Tag.ntag213(data: [])
        let classicATR: [UInt8] = [
            0x3B, 0x8F, 0x80, 0x01, 0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06,
            0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x6A,
        ]
        let result = try TagReader.read(atr: classicATR, transport: &tag)
        #expect(result.kind == .mifareClassic(name: "MIFARE Classic 1K"))
        // GET UID, then LOAD KEYS, which this Type 2 tag refuses: no sector can be read.
        #expect(result.uid != nil && result.ndef == nil && result.apduCount == 2)
        #expect(result.noURLReason?.contains("MIFARE Classic") == true)
        let other = try TagReader.read(kind: .unsupported(name: "FeliCa"), transport: &tag)
        #expect(other.noURLReason?.contains("FeliCa") == true)
    }
}
