import BridgeTestSupport
import Testing

@testable import BridgeCore

/// Decoder behaviour: layouts, modifiers, suffixes, discards, timing, held keys.
struct KeystrokeDecoderTests {
    typealias Output = KeystrokeDecoder.Output

    private func decode(
        _ events: [InputEvent], layout: KeyboardLayout = .us, suffix: KeystrokeDecoder.Suffix = .enter,
        maxLineLength: Int = 4096, timeout: Double? = 0.5
    ) -> [Output] {
        var decoder = KeystrokeDecoder(
            layout: layout, suffix: suffix, maxLineLength: maxLineLength, interKeyTimeout: timeout)
        return decoder.decode(events)
    }

    private func typed(
        _ text: String, _ layout: KeyboardLayout = .us, suffix: KeystrokeDecoder.Suffix? = .enter,
        style: EventScript.ModifierStyle = .sameReport, altGr: EventScript.AltGrStyle = .rightAlt,
        start: Int64 = 1_000_000
    ) -> [InputEvent] {
        let events = EventScript.typing(
            text, layout: layout, suffix: suffix, modifierStyle: style, altGrStyle: altGr,
            timing: EventScript.Timing(start: start))
        if events == nil {
            Issue.record("cannot type \(text) on \(layout.name)")
        }
        return events ?? []
    }

    /// Press and release of one key with no modifiers, as raw events (time in microseconds).
    private func tap(_ code: UInt16, at micros: Int64) -> [InputEvent] {
        EventScript.events(for: [Keystroke(code: code)], timing: EventScript.Timing(start: micros))
    }

    @Test func usLineSameReport() {
        let text = "Hello, World! 123 ~`@#$%^&*()_+{}|:\"<>?-=[]\\;',./"
        #expect(decode(typed(text)) == [.line(text)])
    }

    @Test func usLineShiftSeparateReport() {
        let text = "ABC def GHI"
        #expect(decode(typed(text, style: .separateReport)) == [.line(text)])
    }

    @Test func shiftAfterKeyInSameReportStillShifts() {
        let events =
            [
                InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 1),
                InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_LEFTSHIFT, value: 1),
                InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0),
                InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 0),
                InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_LEFTSHIFT, value: 0),
                InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0),
            ] + tap(Evdev.KEY_B, at: 0) + tap(Evdev.KEY_ENTER, at: 0)
        #expect(decode(events) == [.line("Ab")])
    }

    @Test func swedishWithAltGr() {
        let text = "plings@exempel.se {å}[ÄÖ] €£$\\|~^´`¨ 1+1=2 ½§"
        for style in [EventScript.ModifierStyle.sameReport, .separateReport] {
            #expect(decode(typed(text, .se, style: style), layout: .se) == [.line(text)])
        }
    }

    @Test func germanWithAltGrAndControlAlt() {
        let text = "Straße@Grüße{[]}\\~|€ yZ ^°"
        for altGr in [EventScript.AltGrStyle.rightAlt, .controlAlt] {
            #expect(decode(typed(text, .de, altGr: altGr), layout: .de) == [.line(text)])
        }
    }

    @Test func frenchAzerty() {
        let text = "https://plings.io/x?id=42&a=b#t{[|`\\^@]}~ é è ç à ù"
        #expect(decode(typed(text, .fr), layout: .fr) == [.line(text)])
        #expect(decode(typed(text, .fr, style: .separateReport), layout: .fr) == [.line(text)])
    }

    @Test func ukSpecials() {
        let text = "\"£#~\\|@ `¬ €"
        #expect(decode(typed(text, .uk), layout: .uk) == [.line(text)])
        #expect(KeyboardLayout.uk.keystrokes(for: "#")?.code == Evdev.KEY_BACKSLASH)
        #expect(KeyboardLayout.uk.keystrokes(for: "\\")?.code == Evdev.KEY_102ND)
    }

    @Test func tabSuffix() {
        let events = typed("abc", suffix: .tab) + typed("def", suffix: .tab, start: 2_000_000)
        #expect(decode(events, suffix: .tab) == [.line("abc"), .line("def")])
        // In Enter mode Tab is not a suffix and types nothing.
        #expect(decode(typed("abc", suffix: .tab) + typed("d", start: 1_100_000)) == [.line("abcd")])
    }

    @Test func enterIgnoredInTabMode() {
        let events = typed("ab", suffix: .enter) + typed("c", suffix: .tab, start: 1_100_000)
        #expect(decode(events, suffix: .tab) == [.line("abc")])
    }

    @Test func keypadEnterEndsLine() {
        let events = typed("12", suffix: nil) + tap(Evdev.KEY_KPENTER, at: 1_100_000)
        #expect(decode(events) == [.line("12")])
    }

    @Test func keypadDigitsAndDecimal() {
        let codes = [Evdev.KEY_KP1, Evdev.KEY_KPDOT, Evdev.KEY_KP5, Evdev.KEY_KPMINUS, Evdev.KEY_KPENTER]
        let events = EventScript.events(for: codes.map { Keystroke(code: $0) })
        #expect(decode(events) == [.line("1.5-")])
        #expect(decode(events, layout: .se) == [.line("1,5-")])
    }

    @Test func bareSuffixIsNotALine() {
        #expect(decode(tap(Evdev.KEY_ENTER, at: 0)).isEmpty)
    }

    @Test func synDroppedMidLineDiscardsUpToSuffix() {
        var events = typed("abc", suffix: nil)
        events += [
            InputEvent(seconds: 1, microseconds: 50_000, type: Evdev.EV_SYN, code: Evdev.SYN_DROPPED, value: 0),
            // Everything up to and including the next SYN_REPORT is ignored, even a suffix.
            InputEvent(seconds: 1, microseconds: 50_001, type: Evdev.EV_KEY, code: Evdev.KEY_ENTER, value: 1),
            InputEvent(seconds: 1, microseconds: 50_002, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0),
        ]
        events += typed("gh", start: 1_060_000)  // the tail of the broken scan is swallowed
        events += typed("ok", start: 1_100_000)
        var decoder = KeystrokeDecoder(layout: .us)
        #expect(decoder.decode(events) == [.discarded(.synDropped), .line("ok")])
        #expect(decoder.needsKeyResync)
        decoder.syncHeldKeys(fromBitmap: [UInt8](repeating: 0, count: 96))
        #expect(!decoder.needsKeyResync)
    }

    @Test func synDroppedTailEndsAtTimeout() {
        var events = [InputEvent(seconds: 1, type: Evdev.EV_SYN, code: Evdev.SYN_DROPPED, value: 0)]
        events.append(InputEvent(seconds: 1, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0))
        events += typed("xy", suffix: nil, start: 1_010_000)
        events += typed("fresh", start: 3_000_000)
        #expect(decode(events) == [.discarded(.synDropped), .line("fresh")])
    }

    @Test func overlongLineReportedOnceAndDecodingGoesOn() {
        let events = typed("abcdefgh") + typed("abcde", start: 1_200_000) + typed("abcdefghijklmno", start: 1_400_000)
        #expect(
            decode(events, maxLineLength: 5) == [.discarded(.overlong), .line("abcde"), .discarded(.overlong)])
    }

    @Test func capsLock() {
        var events = tap(Evdev.KEY_CAPSLOCK, at: 1_000_000)
        events += EventScript.events(
            for: [
                Keystroke(code: Evdev.KEY_A), Keystroke(code: Evdev.KEY_B, shift: true), Keystroke(code: Evdev.KEY_1),
                Keystroke(code: Evdev.KEY_ENTER),
            ],
            timing: EventScript.Timing(start: 1_010_000))
        #expect(decode(events) == [.line("Ab1")])
        // xkb-data's fr: the digit row is TWO_LEVEL-like for Caps Lock (unlike Windows AZERTY, no digits).
        #expect(decode(events, layout: .fr) == [.line("Qb&")])
        #expect(decode(events, layout: .de) == [.line("Ab1")])
        // Swedish letters follow CapsLock; AltGr levels do not.
        let se =
            tap(Evdev.KEY_CAPSLOCK, at: 1_000_000)
            + EventScript.events(
                for: [
                    Keystroke(code: Evdev.KEY_LEFTBRACE), Keystroke(code: Evdev.KEY_E, altGr: true),
                    Keystroke(code: Evdev.KEY_ENTER),
                ],
                timing: EventScript.Timing(start: 1_010_000))
        #expect(decode(se, layout: .se) == [.line("Å€")])
    }

    @Test func capsLockFromLED() {
        var decoder = KeystrokeDecoder(layout: .us)
        _ = decoder.feed(InputEvent(type: Evdev.EV_LED, code: Evdev.LED_CAPSL, value: 1), now: 0)
        #expect(decoder.capsLock)
        #expect(decoder.decode(typed("ab")) == [.line("AB")])
    }

    @Test func interKeyTimeoutDiscardsHalfLine() {
        let events = typed("abc", suffix: nil) + typed("def", start: 2_000_000)
        #expect(decode(events) == [.discarded(.interKeyTimeout), .line("def")])
        #expect(decode(events, timeout: nil) == [.line("abcdef")])
        // A gap just under the timeout keeps the line.
        let slow = typed("ab", suffix: nil) + typed("c", start: 1_000_000 + 490_000)
        #expect(decode(slow) == [.line("abc")])
    }

    @Test func tickAndPendingDeadline() {
        var decoder = KeystrokeDecoder(layout: .us, interKeyTimeout: 0.5)
        #expect(decoder.pendingDeadline() == nil)
        let events = typed("ab", suffix: nil)
        #expect(decoder.decode(events).isEmpty)
        let lastPress = events.last { $0.type == Evdev.EV_KEY && $0.value == 1 }?.time ?? -1
        #expect(decoder.pendingDeadline() == lastPress + 0.5)
        #expect(decoder.tick(now: lastPress + 0.4) == nil)
        #expect(decoder.tick(now: lastPress + 0.5) == .discarded(.interKeyTimeout))
        #expect(decoder.pendingDeadline() == nil)
        #expect(decoder.tick(now: lastPress + 10) == nil)
    }

    @Test func nonPrintablesIgnored() {
        let strokes: [Keystroke] = [
            Keystroke(code: Evdev.KEY_A), Keystroke(code: Evdev.KEY_F1), Keystroke(code: Evdev.KEY_UP),
            Keystroke(code: Evdev.KEY_ESC), Keystroke(code: Evdev.KEY_BACKSPACE), Keystroke(code: Evdev.KEY_B),
            Keystroke(code: 0x2FF), Keystroke(code: 0xFFFF), Keystroke(code: Evdev.KEY_ENTER),
        ]
        var events = EventScript.events(for: strokes)
        // Ctrl+1 (no control character in xkb's Control transformation), LeftAlt+D and Meta+E type nothing.
        for (modifier, key) in [
            (Evdev.KEY_LEFTCTRL, Evdev.KEY_1), (Evdev.KEY_LEFTALT, Evdev.KEY_D),
            (Evdev.KEY_LEFTMETA, Evdev.KEY_E),
        ] {
            events.insert(
                contentsOf: [
                    InputEvent(seconds: 1, type: Evdev.EV_KEY, code: modifier, value: 1),
                    InputEvent(seconds: 1, type: Evdev.EV_KEY, code: key, value: 1),
                    InputEvent(seconds: 1, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0),
                    InputEvent(seconds: 1, type: Evdev.EV_KEY, code: key, value: 0),
                    InputEvent(seconds: 1, type: Evdev.EV_KEY, code: modifier, value: 0),
                    InputEvent(seconds: 1, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0),
                ], at: 0)
        }
        #expect(decode(events) == [.line("ab")])
    }

    @Test func autorepeatIgnored() {
        var events = typed("x", suffix: nil)
        events.insert(InputEvent(seconds: 1, type: Evdev.EV_KEY, code: Evdev.KEY_X, value: 2), at: 2)
        events.insert(InputEvent(seconds: 1, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0), at: 3)
        events += tap(Evdev.KEY_ENTER, at: 1_100_000)
        #expect(decode(events) == [.line("x")])
    }

    @Test func deadKeys() {
        func line(_ strokes: [Keystroke], _ layout: KeyboardLayout) -> [Output] {
            let events = EventScript.events(for: strokes + [Keystroke(code: Evdev.KEY_ENTER)], layout: layout)
            return decode(events, layout: layout)
        }
        let circumflex = Keystroke(code: Evdev.KEY_GRAVE)  // de: dead ^
        let space = Keystroke(code: Evdev.KEY_SPACE)
        let a = Keystroke(code: Evdev.KEY_A)
        let one = Keystroke(code: Evdev.KEY_1)
        #expect(line([circumflex, a], .de) == [.line("â")])
        #expect(line([circumflex, space], .de) == [.line("^")])
        // en_US.UTF-8 Compose: <dead_circumflex> <dead_circumflex> : "^", <dead_circumflex> <1> : "¹";
        // nothing for <dead_circumflex> <q>, so the spacing form and then q.
        #expect(line([circumflex, circumflex], .de) == [.line("^")])
        #expect(line([circumflex, one], .de) == [.line("¹")])
        #expect(line([circumflex, Keystroke(code: Evdev.KEY_Q)], .de) == [.line("^q")])
        #expect(line([a, circumflex], .de) == [.line("a^")])
        #expect(
            line([Keystroke(code: Evdev.KEY_RIGHTBRACE), Keystroke(code: Evdev.KEY_O, shift: true)], .se)
                == [.line("Ö")])
        #expect(KeyboardLayout.de.isDeadKey(Evdev.KEY_GRAVE, shift: false, altGr: false))
        #expect(KeyboardLayout.de.keystrokes(for: "^") == nil)
        #expect(KeyboardLayout.de.keystrokeSequence(for: "^")?.count == 2)
        #expect(KeyboardLayout.fr.keystrokes(for: "^").map { $0.code == Evdev.KEY_9 && $0.altGr } == true)
    }

    @Test func heldKeys() {
        var decoder = KeystrokeDecoder(layout: .us)
        #expect(!decoder.anyKeyHeld)
        _ = decoder.feed(InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 1), now: 0)
        _ = decoder.feed(InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0), now: 0)
        #expect(decoder.anyKeyHeld)
        #expect(decoder.heldKeyCodes == [Evdev.KEY_A])
        _ = decoder.feed(InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 0), now: 0)
        #expect(!decoder.anyKeyHeld)
        _ = decoder.feed(InputEvent(type: Evdev.EV_KEY, code: Evdev.KEY_A, value: 0), now: 0)  // stray release
        #expect(!decoder.anyKeyHeld)

        var bitmap = [UInt8](repeating: 0, count: 96)
        bitmap[Int(Evdev.KEY_LEFTSHIFT) / 8] |= 1 << (Evdev.KEY_LEFTSHIFT % 8)
        decoder.syncHeldKeys(fromBitmap: bitmap)
        #expect(decoder.anyKeyHeld)
        #expect(decoder.heldKeyCodes == [Evdev.KEY_LEFTSHIFT])
        // Shift held from before: the next letter is upper case ("a" typed above is still in the line).
        #expect(decoder.decode(tap(Evdev.KEY_Q, at: 0) + tap(Evdev.KEY_ENTER, at: 0)) == [.line("aQ")])
        decoder.syncHeldKeys(fromBitmap: [UInt8](repeating: 0xFF, count: 200))
        #expect(decoder.heldKeyCodes.count == Int(Evdev.KEY_CNT))
        decoder.syncHeldKeys(fromBitmap: [0x01])
        #expect(decoder.heldKeyCodes == [0])
    }

    @Test func layoutLookups() {
        // Expected values: /usr/share/X11/xkb/symbols/{se,de,fr,gb} (xkb-data).
        #expect(KeyboardLayout.se.character(forKey: Evdev.KEY_2, shift: false, altGr: true) == "@")
        #expect(KeyboardLayout.de.character(forKey: Evdev.KEY_Y, shift: true, altGr: false) == "Z")
        #expect(KeyboardLayout.uk.character(forKey: Evdev.KEY_3, shift: true, altGr: false) == "£")
        #expect(KeyboardLayout.uk.name == "gb")
        #expect(KeyboardLayout.us.character(forKey: Evdev.KEY_F1, shift: false, altGr: false) == nil)
        #expect(!KeyboardLayout.us.hasLevel3 && KeyboardLayout.de.hasLevel3)
    }
}
