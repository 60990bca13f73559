import Testing
@testable import BridgeCore

@Suite("NDEF parser")
struct NFCNDEFParserTests {
    @Test("short record round trip")
    func shortRecord() throws {
        let message = NDEFMessage.encode([.uri(nfcPlingsURL)])
        #expect(message[0] == 0xD1)  // MB ME SR, TNF 1
        #expect(message[1] == 0x01 && message[3] == 0x55 && message[4] == 0x04)
        let records = try NDEFParser.parseMessage(message)
        #expect(records == [.uri(nfcPlingsURL)])
        #expect(NDEFURI.uris(in: records) == [nfcPlingsURL])
    }

    @Test("long record (4-byte payload length)")
    func longRecord() throws {
        let payload = [UInt8](repeating: 0x41, count: 300)
        let record = NDEFRecord(tnf: NDEFRecord.TNF.mediaType, type: Array("text/plain".utf8), payload: payload)
        let message = NDEFMessage.encode([record])
        #expect(message[0] == 0xC2)  // MB ME, no SR
        #expect(Array(message[2..<6]) == [0x00, 0x00, 0x01, 0x2C])
        #expect(try NDEFParser.parseMessage(message) == [record])
        // A long record with a small payload is legal too.
        let explicit: [UInt8] = [0xC1, 0x01, 0x00, 0x00, 0x00, 0x04, 0x55, 0x04, 0x61, 0x2E, 0x62]
        #expect(try NDEFParser.parseMessage(explicit) == [.uri("https://a.b")])
    }

    @Test("IL flag and id field")
    func idField() throws {
        let record = NDEFRecord(tnf: 1, type: [0x55], id: [0x69, 0x64], payload: [0x03, 0x78])
        let message = NDEFMessage.encode([record])
        #expect(message == [0xD9, 0x01, 0x02, 0x02, 0x55, 0x69, 0x64, 0x03, 0x78])
        #expect(try NDEFParser.parseMessage(message) == [record])
        #expect(try NDEFParser.parseMessage(message[...]) == [record])
        // A slice whose indices do not start at 0.
        let padded = [0xEE, 0xEE] + message
        #expect(try NDEFParser.parseMessage(padded[2...]) == [record])
    }

    @Test("chunked records are refused")
    func chunked() {
        #expect(nfcParseError([0xB1, 0x01, 0x02, 0x55, 0x04, 0x61]) == .chunkedRecord(record: 0))
        // TNF 6 (unchanged) only exists inside a chunk sequence.
        #expect(nfcParseError([0xD6, 0x00, 0x01, 0x61]) == .chunkedRecord(record: 0))
        var message = NDEFMessage.encode([.text("a")])
        message[0] &= ~0x40  // clear ME on the first
        message += [0x31, 0x01, 0x01, 0x55, 0x00]  // CF on the second
        #expect(nfcParseError(message) == .chunkedRecord(record: 1))
    }

    @Test("record overrunning the message says by how much")
    func overrun() {
        let bytes: [UInt8] = [0xD1, 0x01, 0x10, 0x55, 0x04, 0x61]
        let error = nfcParseError(bytes)
        // Type (1) + payload (16) = 17 bytes needed after the header, 3 present.
        #expect(error == .recordOverrunsMessage(record: 0, by: 14))
        #expect(error?.description == "NDEF record 0 overruns the message by 14 bytes")
        // A 4-byte payload length near 4 GiB must not trap.
        #expect(
            nfcParseError([0xC1, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x55])
                == .recordOverrunsMessage(record: 0, by: 0xFFFF_FFFF))
    }

    @Test("truncated headers, empty message, MB/ME flags")
    func framing() {
        #expect(nfcParseError([]) == .emptyMessage)
        #expect(nfcParseError([0xD1]) == .truncatedHeader(record: 0, offset: 0))
        #expect(nfcParseError([0xC1, 0x01, 0x00, 0x00]) == .truncatedHeader(record: 0, offset: 0))
        #expect(nfcParseError([0xD9, 0x01, 0x01]) == .truncatedHeader(record: 0, offset: 0))
        #expect(nfcParseError([0x51, 0x01, 0x01, 0x55, 0x00]) == .missingMessageBegin)
        #expect(nfcParseError([0x91, 0x01, 0x01, 0x55, 0x00]) == .missingMessageEnd(records: 1))
        #expect(
            nfcParseError([0x91, 0x01, 0x01, 0x55, 0x00, 0xD1, 0x01, 0x01, 0x55, 0x00])
                == .unexpectedMessageBegin(record: 1))
        #expect(nfcParseError([0x91, 0x01, 0x01, 0x55, 0x00, 0x11]) == .truncatedHeader(record: 1, offset: 5))
        for error in [
            NDEFError.emptyMessage, .missingMessageBegin, .chunkedRecord(record: 2),
            .missingMessageEnd(records: 1), .tooManyRecords(limit: 256), .nestingTooDeep(limit: 4),
        ] {
            #expect(!error.description.isEmpty && !error.description.contains("\n"))
        }
    }

    @Test("trailing bytes after ME are tolerated")
    func trailing() throws {
        let message = NDEFMessage.encode([.uri("https://x.y")]) + [0x00, 0x00, 0xFE, 0x12]
        #expect(try NDEFParser.parseMessage(message) == [.uri("https://x.y")])
    }

    @Test("record count is capped")
    func tooMany() {
        let message = NDEFMessage.encode(
            [NDEFRecord](
                repeating: NDEFRecord(tnf: 0, type: [], payload: []),
                count: NDEFParser.maxRecords + 1))
        #expect(nfcParseError(message) == .tooManyRecords(limit: NDEFParser.maxRecords))
        let fine = NDEFMessage.encode([NDEFRecord](repeating: .uri("a:b"), count: NDEFParser.maxRecords))
        #expect(nfcParseError(fine) == nil)
    }

    @Test("text builder")
    func textRecord() throws {
        let record = NDEFRecord.text("Hej", language: "sv")
        #expect(record.payload == [0x02, 0x73, 0x76, 0x48, 0x65, 0x6A])
        #expect(NDEFMessage.encode([]) == [])
    }

    @Test("TNF is masked to 3 bits")
    func tnfMask() {
        #expect(NDEFRecord(tnf: 0xF9, type: [], payload: []).tnf == 1)
    }
}
