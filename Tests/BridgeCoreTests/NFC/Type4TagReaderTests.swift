import Testing
@testable import BridgeCore

@Suite("Type 4 tag reads")
struct NFCType4TagReaderTests {
    let isoDEPATR: [UInt8] = [0x3B, 0x81, 0x80, 0x01, 0x80, 0x80]
    let plingsMessage = NDEFMessage.encode([.uri(nfcPlingsURL)])

    @Test("happy path, chunked by MLe")
    func chunkedByMLe() throws {
        var tag = FakeType4Tag.tag(message: plingsMessage, mle: 16)
        let result = try TagReader.read(atr: isoDEPATR, transport: &tag)
        #expect(result.kind == .type4)
        #expect(result.uri == nfcPlingsURL)
        #expect(result.ndef == plingsMessage)
        #expect(result.uid == [0x08, 0x12, 0x34, 0x56])
        #expect(result.apduCount == 10)
        #expect(
            tag.log == [
                [0xFF, 0xCA, 0x00, 0x00, 0x00],
                [0x00, 0xA4, 0x04, 0x00, 0x07, 0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01, 0x00],
                [0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x03],
                [0x00, 0xB0, 0x00, 0x00, 0x0F],
                [0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x04],
                [0x00, 0xB0, 0x00, 0x00, 0x02],
                [0x00, 0xB0, 0x00, 0x02, 0x10],
                [0x00, 0xB0, 0x00, 0x12, 0x10],
                [0x00, 0xB0, 0x00, 0x22, 0x10],
                [0x00, 0xB0, 0x00, 0x32, 0x08],
            ])
    }

    @Test("one read when MLe covers the message; Le never above 255 or the option")
    func chunkLimits() throws {
        var tag = FakeType4Tag.tag(message: plingsMessage, mle: 0x3B)
        #expect(try TagReader.read(atr: isoDEPATR, transport: &tag).apduCount == 7)

        let big = NDEFMessage.encode([.smartPoster(uri: nfcPlingsURL, title: String(repeating: "t", count: 600))])
        var large = FakeType4Tag.tag(message: big, mle: 0xFFFF)
        let result = try TagReader.read(atr: isoDEPATR, transport: &large)
        #expect(result.uris == [nfcPlingsURL] && result.ndef == big)
        let reads = large.log.dropFirst(6)
        #expect(reads.allSatisfy { $0.count == 5 && $0[4] <= 255 && $0[4] != 0 })
        #expect(reads.count == (big.count + 254) / 255)

        var limited = FakeType4Tag.tag(message: big, mle: 0xFFFF)
        _ = try TagReader.read(atr: isoDEPATR, transport: &limited, options: TagReadOptions(maxType4ReadLength: 32))
        #expect(limited.log.dropFirst(6).allSatisfy { $0[4] <= 32 })
    }

    @Test("short reads advance by what was returned")
    func shortReads() throws {
        var tag = FakeType4Tag.tag(message: plingsMessage, mle: 0x3B)
        tag.maxBytesPerRead = 5
        let result = try TagReader.read(atr: isoDEPATR, transport: &tag)
        #expect(result.uri == nfcPlingsURL)
        // CC in 3 reads of 5, NLEN in 1, the message in reads of 5.
        #expect(result.apduCount == 4 + 3 + 1 + (plingsMessage.count + 4) / 5)
    }

    @Test("no NDEF application: a phone or a bank card")
    func noApplication() {
        var tag = FakeType4Tag.tag(message: plingsMessage)
        tag.hasNDEFApplication = false
        let error = nfcReadError(atr: isoDEPATR, &tag)
        #expect(error == .noNDEFApplication(statusWord: 0x6A82))
        #expect(error?.description.contains("phone or a bank card") == true)
        #expect(tag.log.count == 2)
    }

    @Test("NLEN 0 is an empty tag, not an error")
    func emptyTag() throws {
        var tag = FakeType4Tag.tag(message: [], nlen: 0)
        let result = try TagReader.read(atr: isoDEPATR, transport: &tag)
        #expect(result.ndef == [] && result.noURLReason == "empty NDEF message" && result.apduCount == 6)
    }

    @Test("NLEN larger than the file is an error")
    func nlenTooBig() throws {
        var tag = FakeType4Tag.tag(message: plingsMessage, nlen: 0x7F, maxSize: 0x80)
        #expect(
            nfcReadError(atr: isoDEPATR, &tag)
                == .ndefFileTooLarge(nlen: 0x7F, maxSize: 0x80))
        var fits = FakeType4Tag.tag(message: plingsMessage, maxSize: plingsMessage.count + 2)
        #expect(try TagReader.read(atr: isoDEPATR, transport: &fits).uri == nfcPlingsURL)
    }

    @Test("bad capability containers say why")
    func badCC() {
        let cases: [([UInt8], String)] = [
            (FakeType4Tag.capabilityContainer(version: 0x10), "mapping version 1.0"),
            (FakeType4Tag.capabilityContainer(mle: 0), "MLe is 0"),
            (FakeType4Tag.capabilityContainer(tlvTag: 0x06), "extended"),
            (FakeType4Tag.capabilityContainer(tlvTag: 0x05), "found tag 0x05"),
            (FakeType4Tag.capabilityContainer(fileID: 0xE103), "reserved"),
            (FakeType4Tag.capabilityContainer(maxSize: 1), "cannot hold NLEN"),
            (FakeType4Tag.capabilityContainer(readAccess: 0xFF), "read access 0xFF"),
            ([0x00, 0x0E] + FakeType4Tag.capabilityContainer().dropFirst(2), "CCLEN 14"),
        ]
        for (cc, fragment) in cases {
            var tag = FakeType4Tag.tag(message: plingsMessage)
            tag.files[0xE103] = cc
            let error = nfcReadError(atr: isoDEPATR, &tag)
            guard case .badCapabilityContainer(let reason) = error else {
                Issue.record("expected bad CC for \(fragment), got \(String(describing: error))")
                continue
            }
            #expect(reason.contains(fragment), "\(reason)")
        }
    }

    @Test("missing or short CC file is a status word error naming the command")
    func missingCC() {
        var short = FakeType4Tag.tag(message: plingsMessage)
        short.files[0xE103] = [0x00, 0x0F, 0x20]
        #expect(
            nfcReadError(atr: isoDEPATR, &short)
                == .statusWord(0x6B00, during: "READ BINARY CC offset 3, 12 bytes (00 B0 00 03 0C)"))

        var tag = FakeType4Tag.tag(message: plingsMessage)
        tag.files[0xE103] = nil
        #expect(
            nfcReadError(atr: isoDEPATR, &tag)
                == .statusWord(0x6A82, during: "SELECT CC file E103 (00 A4 00 0C 02 E1 03)"))
    }

    @Test("card removed mid-read, empty reads")
    func faults() {
        var tag = FakeType4Tag.tag(message: plingsMessage, mle: 16)
        tag.faults.removeAtAPDU = 7
        let error = nfcReadError(atr: isoDEPATR, &tag)
        #expect(error == .cardRemoved(during: "READ BINARY NDEF offset 18, 16 bytes (00 B0 00 12 10)"))

        var empty = FakeType4Tag.tag(message: plingsMessage)
        empty.emptyReads = true
        let emptyError = nfcReadError(atr: isoDEPATR, &empty)
        #expect(
            emptyError
                == .malformedResponse(
                    during: "READ BINARY CC offset 0, 15 bytes (00 B0 00 00 0F)",
                    reason: "returned no data bytes"))
    }

    @Test("smart poster on a Type 4 tag")
    func smartPoster() throws {
        let message = NDEFMessage.encode([.text("x"), .smartPoster(uri: nfcPlingsURL, title: "P")])
        var tag = FakeType4Tag.tag(message: message)
        #expect(try TagReader.read(atr: isoDEPATR, transport: &tag).uris == [nfcPlingsURL])
    }
}
