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

    /// The examples of RFC 8259, section 13, with the values the RFC gives them.
    static let rfcImage = """
        {
              "Image": {
                  "Width":  800,
                  "Height": 600,
                  "Title":  "View from 15th Floor",
                  "Thumbnail": {
                      "Url":    "http://www.example.com/image/481989943",
                      "Height": 125,
                      "Width":  100
                  },
                  "Animated" : false,
                  "IDs": [116, 943, 234, 38793]
                }
            }
        """
    static let rfcLocations = """
        [
              {
                 "precision": "zip",
                 "Latitude":  37.7668,
                 "Longitude": -122.3959,
                 "Address":   "",
                 "City":      "SAN FRANCISCO",
                 "State":     "CA",
                 "Zip":       "94107",
                 "Country":   "US"
              },
              {
                 "precision": "zip",
                 "Latitude":  37.371991,
                 "Longitude": -122.026020,
                 "Address":   "",
                 "City":      "SUNNYVALE",
                 "State":     "CA",
                 "Zip":       "94085",
                 "Country":   "US"
              }
        ]
        """

    @Test func parsesTheRFCExamples() throws {
        let image = try JSONParser.parse(Self.rfcImage)["Image"]
        #expect(image?["Width"] == .integer(800))
        #expect(image?["Title"] == .string("View from 15th Floor"))
        #expect(image?["Thumbnail"]?["Url"] == .string("http://www.example.com/image/481989943"))
        #expect(image?["Animated"] == .bool(false))
        #expect(image?["IDs"] == .array([.integer(116), .integer(943), .integer(234), .integer(38793)]))
        guard case .array(let places) = try JSONParser.parse(Self.rfcLocations) else {
            Issue.record("the second example is an array")
            return
        }
        #expect(places.count == 2)
        #expect(places.first?["Latitude"] == .number(37.7668))
        #expect(places.last?["Longitude"] == .number(-122.02602))
        #expect(places.last?["Address"] == .string(""))
        // Section 13 also names three texts that are only values.
        #expect(try JSONParser.parse(#""Hello world!""#) == .string("Hello world!"))
        #expect(try JSONParser.parse("42") == .integer(42))
        #expect(try JSONParser.parse("true") == .bool(true))
    }

    /// Random bytes, and the RFC's examples with a few bytes replaced, deleted or inserted: the parser accepts
    /// exactly the texts RFC 8259's grammar accepts (refusing more only where section 9 lets a parser set a
    /// limit), and what it accepts it writes back as RFC 8259 JSON that parses to the same value.
    @Test func acceptsWhatTheRFCGrammarAccepts() {
        var rng = SeededRandom(seed: 42)
        func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let alphabet = Array(#"{}[]",:0123456789.eE+-tfnrule\ "#.utf8) + [0x00, 0xC3, 0xA9, 0xFF]
        let examples = [Self.rfcImage, Self.rfcLocations].map { Array($0.utf8) }
        var accepted = 0
        var refused = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<pick(40)).map { _ in alphabet[pick(alphabet.count)] }
            } else {
                bytes = examples[pick(examples.count)]
                for _ in 0...pick(3) {
                    let at = pick(bytes.count)
                    switch pick(3) {
                    case 0: bytes[at] = alphabet[pick(alphabet.count)]
                    case 1: bytes.remove(at: at)
                    default: bytes.insert(alphabet[pick(alphabet.count)], at: at)
                    }
                }
            }
            let isJSON = RFC8259Grammar.matches(bytes)
            let text = String(decoding: bytes, as: UTF8.self)
            do throws(JSONParseError) {
                let value = try JSONParser.parse(bytes)
                accepted += 1
                #expect(isJSON, "accepted a text RFC 8259 refuses: \(text.debugDescription)")
                let written = Array(value.encoded().utf8)
                #expect(RFC8259Grammar.matches(written), "wrote a text RFC 8259 refuses: \(value.encoded())")
                #expect((try? JSONParser.parse(written)) == value)
            } catch {
                refused += 1
                let limit = error.message == "number out of range" || error.message.hasPrefix("nesting deeper")
                #expect(!isJSON || limit, "refused a text RFC 8259 accepts: \(text.debugDescription): \(error)")
            }
        }
        // Both answers were exercised (the mutated examples keep many texts valid).
        #expect(accepted > 1000)
        #expect(refused > 1000)
    }

    @Test func encodesControlCharactersEscaped() {
        #expect(JSONValue.string("a\u{01}b\u{7F}").encoded() == #""a\u0001b\u007f""#)
        #expect(JSONValue.number(.infinity).encoded() == "null")
    }

    /// RFC 8259 section 7: only the quotation mark, the reverse solidus and the controls must be escaped; other
    /// characters go out as they are, also those whose UTF-8 starts like a C1 control's (U+00A0...U+00BF).
    @Test func encodesOtherCharactersAsTheyAre() throws {
        let text = "20\u{B0}C\u{A0}caf\u{E9} \u{1F600} plain"
        #expect(JSONValue.string(text).encoded() == "\"" + text + "\"")
        #expect(JSONValue.string(#"say "hi" \ bye"#).encoded() == #""say \"hi\" \\ bye""#)
        #expect(JSONValue.string("\u{B0}\u{85}").encoded() == #""\#u{B0}\u0085""#)
        #expect(try JSONParser.parse(Array("\"\(text)\"".utf8)) == .string(text))
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
        #expect(LogLine.redact("tok1tok1 x=tok1", secrets: ["tok1"]) == "[redacted][redacted] x=[redacted]")
    }
}
