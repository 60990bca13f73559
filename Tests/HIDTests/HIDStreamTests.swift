import BridgeTestSupport
import Testing

@testable import BridgeCore

/// Byte parsing, round trips of every layout, evemu text, robustness.
struct HIDStreamTests {
    @Test func eventEncodingRoundTrip() {
        let event = InputEvent(
            seconds: 1_700_000_000, microseconds: 123_456, type: Evdev.EV_MSC, code: Evdev.MSC_SCAN,
            value: -458_756)
        let bytes = event.encoded
        #expect(bytes.count == InputEvent.size)
        #expect(bytes[16] == 0x04 && bytes[17] == 0x00 && bytes[18] == 0x04)
        let decoded = bytes.withUnsafeBytes { InputEvent(bytes: $0, offset: 0) }
        #expect(decoded == event)
        #expect(bytes.withUnsafeBytes { InputEvent(bytes: $0, offset: 1) } == nil)
        #expect(bytes.withUnsafeBytes { InputEvent(bytes: $0, offset: -1) } == nil)
        #expect(bytes.withUnsafeBytes { InputEvent(bytes: $0, offset: Int.max) } == nil)
    }

    @Test func chunkSplitStreamThroughParser() {
        guard let events = EventScript.typing("Plings-42 åäö@€", layout: .se) else {
            Issue.record("cannot type")
            return
        }
        let bytes = InputEvent.encode(events)
        var random = SeededRandom(seed: 7)
        for round in 0..<50 {
            var parser = InputEventParser()
            var parsed: [InputEvent] = []
            var offset = 0
            while offset < bytes.count {
                let size = round == 0 ? 1 : min(bytes.count - offset, 1 + random.below(60))
                parsed += parser.parse(Array(bytes[offset..<(offset + size)]))
                offset += size
            }
            #expect(parsed == events)
            #expect(parser.bufferedByteCount == 0)
        }
        var parser = InputEventParser()
        #expect(parser.parse(Array(bytes.prefix(30))).count == 1)
        #expect(parser.bufferedByteCount == 6)
        parser.reset()
        #expect(parser.bufferedByteCount == 0)
        #expect(parser.parse([UInt8]()).isEmpty)

        var decoder = KeystrokeDecoder(layout: .se)
        #expect(decoder.decode(InputEventParser().parsedAll(bytes)) == [.line("Plings-42 åäö@€")])
    }

    @Test func everyLayoutRoundTrips() {
        let ascii = (UInt8(0x20)...UInt8(0x7E)).map { Character(Unicode.Scalar($0)) }
        for layout in [KeyboardLayout.us, .se, .de, .uk, .fr] {
            // All printable ASCII is typable on every built-in layout.
            let missing = ascii.filter { layout.keystrokeSequence(for: $0) == nil }
            #expect(missing.isEmpty, "\(layout.name) cannot type \(missing)")
            let everything = ascii + layout.characters.filter { !ascii.contains($0) }
            for style in [EventScript.ModifierStyle.sameReport, .separateReport] {
                for altGr in [EventScript.AltGrStyle.rightAlt, .controlAlt] {
                    // One character per line, then everything in one line.
                    for character in everything {
                        let text = String(character)
                        let events =
                            EventScript.typing(
                                text, layout: layout, modifierStyle: style, altGrStyle: altGr) ?? []
                        var decoder = KeystrokeDecoder(layout: layout)
                        #expect(decoder.decode(events) == [.line(text)], "\(layout.name) \(text)")
                    }
                    let text = String(everything)
                    let events = EventScript.typing(text, layout: layout, modifierStyle: style, altGrStyle: altGr)
                    var decoder = KeystrokeDecoder(layout: layout)
                    #expect(decoder.decode(events ?? []) == [.line(text)], "\(layout.name) all")
                }
            }
        }
    }

    @Test func evemuText() {
        let events = [
            InputEvent(seconds: 0, microseconds: 1, type: Evdev.EV_MSC, code: Evdev.MSC_SCAN, value: 458_756),
            InputEvent(seconds: 12, microseconds: 345_678, type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 1),
            InputEvent(seconds: 12, microseconds: 345_678, type: Evdev.EV_SYN, code: Evdev.SYN_DROPPED, value: -1),
        ]
        #expect(
            EventScript.evemuText(events) == """
                E: 0.000001 0004 0004 458756
                E: 12.345678 0001 001e 1
                E: 12.345678 0000 0003 -1

                """)
        let typed = EventScript.typing("A", layout: .us) ?? []
        #expect(typed.first == InputEvent(seconds: 1, type: Evdev.EV_MSC, code: Evdev.MSC_SCAN, value: 0x700E1))
        #expect(typed.filter { $0.type == Evdev.EV_SYN }.count == 4)
        #expect(HIDUsage.scanValue(forKey: Evdev.KEY_A) == 0x70004)
        #expect(HIDUsage.scanValue(forKey: Evdev.KEY_0) == 0x70027)
        #expect(HIDUsage.scanValue(forKey: Evdev.KEY_BACKSLASH, layout: .us) == 0x70031)
        #expect(HIDUsage.scanValue(forKey: Evdev.KEY_BACKSLASH, layout: .de) == 0x70032)
        #expect(HIDUsage.scanValue(forKey: Evdev.KEY_102ND) == 0x70064)
        #expect(HIDUsage.scanValue(forKey: 0x2FF) == nil)
    }

    @Test func randomBytesDoNotCrash() {
        var random = SeededRandom(seed: 42)
        for layout in [KeyboardLayout.us, .se, .de, .uk, .fr] {
            var parser = InputEventParser()
            var decoder = KeystrokeDecoder(layout: layout, maxLineLength: 64, interKeyTimeout: 0.05)
            var now = 0.0
            for _ in 0..<2_000 {
                let chunk = (0..<random.below(200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                parser.parse(chunk).forEach { event in
                    now += Double(random.below(100)) / 1000
                    decoder.feed(event, now: now) { output in
                        if case .line(let text) = output {
                            #expect(text.unicodeScalars.count <= 64)
                        }
                    }
                }
                _ = decoder.tick(now: now)
                _ = decoder.pendingDeadline()
            }
            // Plausible events (real types, small codes, values 0...2) reach the deeper paths.
            for _ in 0..<200_000 {
                let types = [Evdev.EV_SYN, Evdev.EV_KEY, Evdev.EV_KEY, Evdev.EV_KEY, Evdev.EV_MSC, Evdev.EV_LED]
                let type = types[random.below(types.count)]
                let code = type == Evdev.EV_SYN ? UInt16(random.below(4)) : UInt16(random.below(130))
                let event = InputEvent(type: type, code: code, value: Int32(random.below(4)) - 1)
                now += Double(random.below(30)) / 1000
                decoder.feed(event, now: now) { output in
                    if case .line(let text) = output {
                        #expect(text.unicodeScalars.count <= 64)
                    }
                }
            }
        }
    }
}

extension InputEventParser {
    /// Test helper: parses a whole buffer.
    func parsedAll(_ bytes: [UInt8]) -> [InputEvent] {
        var copy = self
        return copy.parse(bytes)
    }
}
