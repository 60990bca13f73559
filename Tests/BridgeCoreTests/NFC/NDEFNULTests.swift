import Testing
@testable import BridgeCore

/// Security review finding 6: NULs in URI records. Real tags written by common apps pad the URI record with
/// NULs (a public NTAG216 dump reads `https://www.guidoz.com` followed by six NULs); a NUL inside a URI is a
/// broken tag and must say so.
@Suite("NDEF URIs with NULs")
struct NFCNDEFNULTests {
    /// The URI record as that dump holds it: RTD-URI prefix code 0x02 ("https://www."), then the rest, then
    /// six NULs counted in the payload length.
    let paddedGuidoz = NDEFRecord(
        tnf: NDEFRecord.TNF.wellKnown, type: [0x55], payload: [0x02] + Array("guidoz.com".utf8) + [0, 0, 0, 0, 0, 0])

    @Test("trailing NUL padding is not part of the URI")
    func paddingIsDropped() {
        #expect(NDEFURI.decode(record: paddedGuidoz) == "https://www.guidoz.com")
        let absolute = NDEFRecord(
            tnf: NDEFRecord.TNF.absoluteURI, type: Array("https://a.example/".utf8) + [0, 0], payload: [])
        #expect(NDEFURI.decode(record: absolute) == "https://a.example/")
        // A record of nothing but padding carries no URI.
        let onlyPadding = NDEFRecord(tnf: NDEFRecord.TNF.wellKnown, type: [0x55], payload: [0, 0, 0])
        #expect(NDEFURI.decode(record: onlyPadding) == nil)
    }

    @Test("a padded Plings URL on a Type 2 tag is read and recognised as that URL")
    func paddedPlingsTagIsRecognised() throws {
        let padded = NDEFRecord(
            tnf: NDEFRecord.TNF.wellKnown, type: [0x55],
            payload: NDEFURI.encodePayload(nfcPlingsURL) + [0, 0, 0, 0, 0, 0])
        var tag = FakeType2Tag.ntag213(data: nfcNDEFTLV(NDEFMessage.encode([padded])))
        let result = try TagReader.read(atr: nfcUltralightATR, transport: &tag)
        #expect(result.uri == nfcPlingsURL)
        #expect(Array(result.uri?.utf8 ?? "".utf8).contains(0) == false)
        let time = try #require(Timestamp.parse("2026-06-14T08:00:00Z"))
        let scan = ScanBuilder(parser: PlingsURLParser()).build(
            Read(sourceKind: SourceKind("nfc"), device: "r", raw: result.uri ?? "", time: time), fix: nil)
        #expect(scan.state == .pending && scan.identifier == "4kyQCd5tMDjJVWJKRzVT")
    }

    @Test("a NUL inside a URL makes the read unrecognized, and the reason says so")
    func innerNULIsNamed() {
        let broken = "https://s.plings.io/?t=n&i=4kyQ\u{0}Cd5t&p=1"
        let record = NDEFRecord(tnf: NDEFRecord.TNF.wellKnown, type: [0x55], payload: NDEFURI.encodePayload(broken))
        #expect(NDEFURI.decode(record: record) == broken)
        let reason = PlingsURLParser().parse(broken)
        #expect(reason == .failure(.controlCharacter(0, byte: 32)))
        #expect(UnrecognizedReason.controlCharacter(0, byte: 32).description == "URL contains a NUL at byte 32")
        #expect(
            UnrecognizedReason.controlCharacter(0x1B, byte: 2).description
                == "URL contains the control character U+001B at byte 2")
    }
}
