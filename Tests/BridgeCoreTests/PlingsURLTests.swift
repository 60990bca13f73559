import Testing

@testable import BridgeCore

/// docs/contracts.md, "Plings URL": what is a Plings URL, and why everything else is not.
struct PlingsURLTests {
    let parser = PlingsURLParser()

    static let valid: [(String, PlingsIdentifier)] = [
        ("https://s.plings.io/?t=q&i=ABC&p=4.2.3", .init(type: .qr, identifier: "ABC", path: "4.2.3")),
        (
            "http://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6",
            .init(type: .nfc, identifier: "4kyQCd5tMDjJVWJKRzVT", path: "4.2.3.3.6")
        ),
        ("HTTPS://S.PLINGS.IO/?t=r&i=abc&p=1", .init(type: .rfid, identifier: "abc", path: "1")),
        ("https://s.plings.io?t=b&i=Z9&p=10.20", .init(type: .barcode, identifier: "Z9", path: "10.20")),
        ("https://s.plings.io/?p=4.2&i=XYZ&t=q", .init(type: .qr, identifier: "XYZ", path: "4.2")),
        (
            "https://s.plings.io/?t=q&i=ABC&p=4.2.3&cp=Kx7",
            .init(type: .qr, identifier: "ABC", path: "4.2.3", classPointer: "Kx7")
        ),
        ("https://s.plings.io/?t=q&i=ABC&p=4.2.3&cp=", .init(type: .qr, identifier: "ABC", path: "4.2.3")),
        ("https://s.plings.io/?t=q&i=%41BC&p=4%2E2", .init(type: .qr, identifier: "ABC", path: "4.2")),
        (
            "https://s.plings.io/?t=q&i=ABC&p=4.2.3&utm_source=x&utm_source=y",
            .init(type: .qr, identifier: "ABC", path: "4.2.3")
        ),
        ("https://s.plings.io/?t=q&i=ABC&p=4.2.3#frag", .init(type: .qr, identifier: "ABC", path: "4.2.3")),
        ("  https://s.plings.io/?t=q&i=ABC&p=4.2.3\r\n", .init(type: .qr, identifier: "ABC", path: "4.2.3")),
        ("https://s.plings.io:443/?t=q&i=ABC&p=4", .init(type: .qr, identifier: "ABC", path: "4")),
        ("https://s.plings.io./?t=q&i=ABC&p=4", .init(type: .qr, identifier: "ABC", path: "4")),
        ("https://s.plings.io/?&t=q&&i=ABC&p=4&", .init(type: .qr, identifier: "ABC", path: "4")),
    ]

    @Test(arguments: valid)
    func acceptsValidURL(_ url: String, _ expected: PlingsIdentifier) throws {
        #expect(try parser.parse(url).get() == expected)
    }

    static let invalid: [(String, UnrecognizedReason)] = [
        ("", .empty),
        ("   ", .empty),
        ("5901234123457", .notAURL),
        ("hello world", .notAURL),
        ("ftp://s.plings.io/?t=q&i=ABC&p=4", .unsupportedScheme("ftp")),
        ("https://evil.example/?t=q&i=ABC&p=4", .hostNotAccepted("evil.example")),
        ("https://s.plings.io.evil.example/?t=q&i=ABC&p=4", .hostNotAccepted("s.plings.io.evil.example")),
        ("https://user@s.plings.io/?t=q&i=ABC&p=4", .notAURL),
        ("https://s.plings.io/x?t=q&i=ABC&p=4", .unexpectedPath("/x")),
        ("https://s.plings.io/", .missingParameter("i")),
        ("https://s.plings.io/?t=q&p=4", .missingParameter("i")),
        ("https://s.plings.io/?t=q&i=&p=4", .missingParameter("i")),
        ("https://s.plings.io/?t=q&i=ABC", .missingParameter("p")),
        ("https://s.plings.io/?i=ABC&p=4", .missingParameter("t")),
        ("https://s.plings.io/?t=x&i=ABC&p=4", .badType("x")),
        ("https://s.plings.io/?t=Q&i=ABC&p=4", .badType("Q")),
        ("https://s.plings.io/?t=q&i=AB0C&p=4", .badIdentifier),  // 0 is not base58
        ("https://s.plings.io/?t=q&i=ABIl&p=4", .badIdentifier),  // I and l are not base58
        ("https://s.plings.io/?t=q&i=ABC&p=4..2", .badPath("4..2")),
        ("https://s.plings.io/?t=q&i=ABC&p=.4", .badPath(".4")),
        ("https://s.plings.io/?t=q&i=ABC&p=4.", .badPath("4.")),
        ("https://s.plings.io/?t=q&i=ABC&p=4.a", .badPath("4.a")),
        ("https://s.plings.io/?t=q&i=ABC&i=DEF&p=4", .duplicateParameter("i")),
        ("https://s.plings.io/?t=q&i=ABC&p=4&p=5", .duplicateParameter("p")),
        ("https://s.plings.io/?t=q&i=AB%ZZ&p=4", .badPercentEncoding),
        ("https://s.plings.io/?t=q&i=AB%C3&p=4", .badPercentEncoding),  // invalid UTF-8 after decoding
        ("https://s.plings.io/?t=q&i=ABC&p=4.2.3 garbage", .badPath("4.2.3 garbage")),
        ("https://s.plings.io/?t=q&i=ÅÄÖ&p=4", .badIdentifier),
        ("https://s.pl\u{0131}ngs.io/?t=q&i=ABC&p=4", .hostNotAccepted("s.pl\u{0131}ngs.io")),
        ("https://s.plings.io/?t=q&i=ABC&p=4&cp=a%20b", .badClassPointer),
        ("s.plings.io/?t=q&i=ABC&p=4", .notAURL),
        ("https://s.plings.io:99999/?t=q&i=ABC&p=4", .notAURL),
    ]

    @Test(arguments: invalid)
    func rejectsWithReason(_ url: String, _ reason: UnrecognizedReason) {
        #expect(parser.parse(url) == .failure(reason))
    }

    @Test func tableHasAtLeastThirtyCases() {
        #expect(Self.valid.count + Self.invalid.count >= 30)
    }

    @Test func tenKilobyteInputIsRejectedQuickly() {
        let long = "https://s.plings.io/?t=q&i=" + String(repeating: "A", count: 10_240) + "&p=4"
        #expect(parser.parse(long) == .failure(.tooLong(long.utf8.count)))
    }

    /// Security review finding 7: docs/contracts.md sets no length for `i`, `p` or `cp`; only the 2048-byte bound on the
    /// whole URL holds, and every rejection's reason is true.
    @Test func longFieldsUnderTheURLBoundAreAccepted() throws {
        let identifier = String(repeating: "4kyQCd5tMDjJVWJKRzVT", count: 20)  // 400 base58 characters
        let classPointer = String(repeating: "K7-x.", count: 60)  // 300 bytes
        let path = "1234567890." + Array(repeating: "7", count: 40).joined(separator: ".")  // 10 digits, 41 parts
        let url = "https://s.plings.io/?t=n&i=\(identifier)&p=\(path)&cp=\(classPointer)"
        #expect(url.utf8.count < PlingsURLParser.maximumLength)
        let parsed = try parser.parse(url).get()
        #expect(parsed.identifier == identifier && parsed.classPointer == classPointer && parsed.path == path)
        // The whole-URL bound still holds, and its reason gives the real numbers.
        let tooLong = "https://s.plings.io/?t=n&i=\(identifier)&p=4&cp=" + String(repeating: "x", count: 2048)
        #expect(parser.parse(tooLong) == .failure(.tooLong(tooLong.utf8.count)))
        #expect(UnrecognizedReason.tooLong(2100).description == "read is 2100 bytes, longer than 2048")
        // A rejected identifier or class pointer is rejected for what it contains, and the reason says that.
        #expect(UnrecognizedReason.badIdentifier.description == "identifier 'i' is not base58")
        #expect(
            UnrecognizedReason.badClassPointer.description
                == "class pointer 'cp' has characters other than visible ASCII")
    }

    @Test func configuredHostsReplaceTheDefault() {
        let custom = PlingsURLParser(hosts: ["Q.Example.org"])
        #expect((try? custom.parse("https://q.example.org/?t=q&i=A&p=1").get()) != nil)
        #expect(custom.parse("https://s.plings.io/?t=q&i=A&p=1") == .failure(.hostNotAccepted("s.plings.io")))
    }

    @Test func reasonsReadWell() {
        #expect(UnrecognizedReason.badPath("4..2").description == "path 'p=4..2' is not dotted decimal numbers")
        #expect(UnrecognizedReason.hostNotAccepted("x.y").description.contains("x.y"))
    }
}
