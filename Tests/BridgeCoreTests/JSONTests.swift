import BridgeTestSupport
import Testing

@testable import BridgeCore

struct JSONTests {
    @Test func parsesAndReencodesInOrder() throws {
        let text = #"{"b":1,"a":[true,false,null,-2.5e3,"x\u00e9\n\"\\"],"c":{}}"#
        let value = try JSONParser.parse(text)
        #expect(value.encoded() == #"{"b":1,"a":[true,false,null,-2500.0,"xé\n\"\\"],"c":{}}"#)
        #expect(value["b"] == .integer(1))
        #expect(value["a"].map { if case .array(let a) = $0 { return a.count } else { return 0 } } == 5)
    }

    @Test func tellsBooleansFromNumbers() throws {
        let value = try JSONParser.parse(#"{"x":true,"y":1}"#)
        #expect(value["x"]?.boolValue == true)
        #expect(value["x"]?.doubleValue == nil)
        #expect(value["y"]?.boolValue == nil)
    }

    @Test func surrogatePairs() throws {
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(throws: JSONParseError.self) { try JSONParser.parse(#""\ud83d""#) }
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "tru", "\"abc", "{\"a\" 1}", "[1 2]", "nul", "1 2",
        "\"\u{01}\"", "\"\\x\"", "{1:2}", "1e", "[", "\"\\u12\"",
    ])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test func invalidUTF8IsAnError() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
    }

    @Test func depthIsBounded() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        #expect((try? JSONParser.parse(ok)) != nil)
    }

    @Test func randomBytesNeverCrash() {
        var rng = SeededRandom(seed: 42)
        let alphabet = Array(#"{}[]",:0123456789.eE+-tfnrule\ "#.utf8) + [0x00, 0xC3, 0xA9, 0xFF]
        for _ in 0..<20_000 {
            let bytes = (0..<Int(rng.next() % 40)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            _ = try? JSONParser.parse(bytes)
        }
    }

    @Test func encodesControlCharactersEscaped() {
        #expect(JSONValue.string("a\u{01}b\u{7F}").encoded() == #""a\u0001b\u007f""#)
        #expect(JSONValue.number(.infinity).encoded() == "null")
    }
}

struct LogLineTests {
    @Test func quotesAndEscapes() {
        let line = LogLine.format(
            level: "warn", message: "tag read failed",
            fields: [("reader", "ACS ACR122U 00 00"), ("n", "3"), ("x", "a\nlevel=error")])
        #expect(line == #"level=warn msg="tag read failed" reader="ACS ACR122U 00 00" n=3 x="a\nlevel=error""#)
        #expect(!line.contains("\n"))
        // Other control characters (a hostile tag's bytes) and DEL are escaped and force quotes too.
        #expect(LogLine.quote("a\u{01}\u{1B}[2J") == #""a\u0001\u001b[2J""#)
        #expect(LogLine.quote("del\u{7F}") == #""del\u007f""#)
        #expect(LogLine.quote("plain") == "plain")
    }

    /// Security review finding 1: C1 controls (NEL U+0085 is a line break to some log readers, U+009B is CSI to
    /// some terminals) are escaped in logs and JSON too; a JSON reader decodes them to the same text.
    @Test func c1ControlsAreEscaped() throws {
        #expect(LogLine.quote("a\u{85}level=error\u{9B}2J") == #""a\u0085level=error\u009b2J""#)
        #expect(LogLine.quote("caf\u{E9}") == "caf\u{E9}")  // letters beyond ASCII are not controls
        let encoded = JSONValue.string("x\u{80}\u{9F}").encoded()
        #expect(encoded == #""x\u0080\u009f""#)
        #expect(try JSONParser.parse(encoded) == .string("x\u{80}\u{9F}"))
        #expect(TerminalText.escape("a\u{85}\u{1B}\\\u{A0}") == #"a\x85\x1b\\"# + "\u{A0}")
    }

    @Test func redactsSecrets() {
        #expect(LogLine.redact("Bearer s3cr3t-token!", secrets: ["s3cr3t-token"]) == "Bearer [redacted]!")
        #expect(LogLine.redact("abc", secrets: ["a"]) == "abc")
    }
}
