import Testing
@testable import BridgeCore

@Suite("NDEF URIs")
struct NFCNDEFURITests {
    @Test("the RTD-URI prefix table 0x00...0x23")
    func prefixTable() {
        let expected = [
            "", "http://www.", "https://www.", "http://", "https://", "tel:", "mailto:",
            "ftp://anonymous:anonymous@", "ftp://ftp.", "ftps://", "sftp://", "smb://", "nfs://", "ftp://",
            "dav://", "news:", "telnet://", "imap:", "rtsp://", "urn:", "pop:", "sip:", "sips:", "tftp:",
            "btspp://", "btl2cap://", "btgoep://", "tcpobex://", "irdaobex://", "file://", "urn:epc:id:",
            "urn:epc:tag:", "urn:epc:pat:", "urn:epc:raw:", "urn:epc:", "urn:nfc:",
        ]
        #expect(NDEFURI.prefixes == expected)
        #expect(NDEFURI.prefixes.count == 0x24)
        for code in 0...0x23 {
            #expect(NDEFURI.decode(payload: [UInt8(code)] + Array("rest".utf8)) == expected[code] + "rest")
        }
    }

    @Test("reserved codes decode without a prefix; bad payloads are nil")
    func reservedAndInvalid() {
        #expect(NDEFURI.decode(payload: [0x24] + Array("x:y".utf8)) == "x:y")
        #expect(NDEFURI.decode(payload: [0xFF] + Array("x:y".utf8)) == "x:y")
        #expect(NDEFURI.decode(payload: []) == nil)
        #expect(NDEFURI.decode(payload: [0x04, 0xC3, 0x28]) == nil)  // invalid UTF-8
        #expect(NDEFURI.decode(payload: [0x04, 0xFF]) == nil)
        #expect(NDEFURI.decode(payload: [0x04] + Array("s.plings.io/å".utf8)) == "https://s.plings.io/å")
    }

    @Test("the builder picks the longest prefix")
    func bestPrefix() {
        #expect(NDEFURI.encodePayload("https://www.plings.io").first == 0x02)
        let rest = "s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"
        #expect(NDEFURI.encodePayload(nfcPlingsURL) == [0x04] + Array(rest.utf8))
        #expect(NDEFURI.encodePayload("urn:epc:id:sgtin:1").first == 0x1E)
        #expect(NDEFURI.encodePayload("urn:epc:x").first == 0x22)
        #expect(NDEFURI.encodePayload("urn:nfc:sn:x").first == 0x23)
        #expect(NDEFURI.encodePayload("HTTPS://X").first == 0x00)
        for (code, prefix) in NDEFURI.prefixes.enumerated() {
            let uri = prefix + "z"
            #expect(NDEFURI.decode(payload: NDEFURI.encodePayload(uri)) == uri, "code \(code)")
        }
    }

    @Test("smart poster URIs are found")
    func smartPoster() throws {
        let message = NDEFMessage.encode([.smartPoster(uri: nfcPlingsURL, title: "Plings")])
        let records = try NDEFParser.parseMessage(message)
        #expect(records.count == 1 && records[0].type == [0x53, 0x70])
        #expect(NDEFURI.uris(in: records) == [nfcPlingsURL])
    }

    @Test("text record then URI record")
    func textThenURI() throws {
        let records = try NDEFParser.parseMessage(NDEFMessage.encode([.text("Hello"), .uri(nfcPlingsURL)]))
        #expect(NDEFURI.uris(in: records) == [nfcPlingsURL])
    }

    @Test("several URIs keep message order, absolute URIs included")
    func order() throws {
        let records: [NDEFRecord] = [
            .uri("https://a.example/1"), .text("t"), .smartPoster(uri: "https://b.example/2", title: "B"),
            .absoluteURI("https://c.example/3"), .uri("https://d.example/4"),
        ]
        let parsed = try NDEFParser.parseMessage(NDEFMessage.encode(records))
        #expect(
            NDEFURI.uris(in: parsed) == [
                "https://a.example/1", "https://b.example/2", "https://c.example/3",
                "https://d.example/4",
            ])
    }

    @Test("nesting is followed to the depth limit only")
    func nesting() {
        func nested(_ levels: Int) -> NDEFRecord {
            levels == 0 ? .uri("https://deep.example") : .smartPoster(records: [nested(levels - 1)])
        }
        for levels in 1...NDEFParser.maxNestingDepth {
            #expect(NDEFURI.uris(in: [nested(levels)]) == ["https://deep.example"], "levels \(levels)")
        }
        #expect(NDEFURI.uris(in: [nested(NDEFParser.maxNestingDepth + 1)]) == [])
        #expect(NDEFURI.uris(in: [nested(40)]) == [])
    }

    @Test("a broken smart poster is skipped, the other URIs stay")
    func brokenSmartPoster() {
        let broken = NDEFRecord(tnf: 1, type: [0x53, 0x70], payload: [0xD1, 0x01, 0x30, 0x55])
        #expect(NDEFURI.uris(in: [broken, .uri("https://ok.example")]) == ["https://ok.example"])
    }

    @Test("records that are not URIs give nothing; empty URIs are skipped")
    func nonURIs() {
        #expect(NDEFURI.decode(record: .text("https://not.a.uri")) == nil)
        #expect(NDEFURI.decode(record: NDEFRecord(tnf: 2, type: [0x55], payload: [0x04, 0x61])) == nil)
        #expect(NDEFURI.uris(in: [NDEFRecord(tnf: 1, type: [0x55], payload: [0x00])]) == [])
        #expect(NDEFURI.uris(in: [NDEFRecord(tnf: 3, type: [0xC3, 0x28], payload: [])]) == [])
    }
}
