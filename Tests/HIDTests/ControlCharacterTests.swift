import Testing

@testable import BridgeCore

/// GS1's group separator and other control characters as keyboard-wedge scanners send them: Ctrl chords (what
/// xkb's Control transformation gives) and Windows Alt+numpad codes; Num Lock on the keypad.
struct ControlCharacterTests {
    typealias Output = KeystrokeDecoder.Output
    private static let gs = "\u{1D}"

    /// One report per element: codes pressed (value 1) or released (value 0), 2 ms apart.
    private func reports(_ steps: [([UInt16], Int32)]) -> [InputEvent] {
        var events: [InputEvent] = []
        for (index, (codes, value)) in steps.enumerated() {
            let micros = 1_000_000 + Int64(index) * 2_000
            for code in codes {
                events.append(InputEvent(microseconds: micros, type: Evdev.EV_KEY, code: code, value: value))
            }
            events.append(InputEvent(microseconds: micros, type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0))
        }
        return events
    }

    private func tap(_ codes: UInt16...) -> [([UInt16], Int32)] { [(codes, 1), (codes.reversed(), 0)] }

    private func decode(_ steps: [([UInt16], Int32)], _ layout: KeyboardLayout = .us) -> [Output] {
        var decoder = KeystrokeDecoder(layout: layout)
        return decoder.decode(reports(steps))
    }

    /// "01" GS "10" as GS1 Application Identifiers would be framed, GS sent as Ctrl+].
    @Test func groupSeparatorAsControlBracket() {
        let steps =
            tap(Evdev.KEY_0) + tap(Evdev.KEY_1) + tap(Evdev.KEY_LEFTCTRL, Evdev.KEY_RIGHTBRACE) + tap(Evdev.KEY_1)
            + tap(Evdev.KEY_0) + tap(Evdev.KEY_ENTER)
        #expect(decode(steps) == [.line("01" + Self.gs + "10")])
        // On de, ] is AltGr+9: Ctrl+AltGr+9 is GS in xkb too.
        let de =
            tap(Evdev.KEY_A) + tap(Evdev.KEY_LEFTCTRL, Evdev.KEY_RIGHTALT, Evdev.KEY_9) + tap(Evdev.KEY_B)
            + tap(Evdev.KEY_ENTER)
        #expect(decode(de, .de) == [.line("a" + Self.gs + "b")])
    }

    /// Alt held, 0 0 2 9 on the keypad, Alt released: one GS (Windows Alt codes; ASCII 29).
    @Test func groupSeparatorAsAltCode() {
        let altCode =
            [([Evdev.KEY_LEFTALT], Int32(1))] + tap(Evdev.KEY_KP0) + tap(Evdev.KEY_KP0) + tap(Evdev.KEY_KP2)
            + tap(Evdev.KEY_KP9) + [([Evdev.KEY_LEFTALT], 0)]
        let steps = tap(Evdev.KEY_A) + altCode + tap(Evdev.KEY_B) + tap(Evdev.KEY_ENTER)
        #expect(decode(steps) == [.line("a" + Self.gs + "b")])
        #expect(decode(steps, .de) == [.line("a" + Self.gs + "b")])
        // The last digit and the Alt release in one report: the digit counts.
        let sameReport =
            [([Evdev.KEY_LEFTALT], Int32(1))] + tap(Evdev.KEY_KP6) + [
                ([Evdev.KEY_KP5], 1), ([Evdev.KEY_KP5, Evdev.KEY_LEFTALT], 0),
            ]
            + tap(Evdev.KEY_ENTER)
        #expect(decode(sameReport) == [.line("A")])
        // With a leading 0, 128...159 are Windows-1252: Alt+0128 is the euro sign.
        let euro =
            [([Evdev.KEY_LEFTALT], Int32(1))] + tap(Evdev.KEY_KP0) + tap(Evdev.KEY_KP1) + tap(Evdev.KEY_KP2)
            + tap(Evdev.KEY_KP8) + [([Evdev.KEY_LEFTALT], 0)] + tap(Evdev.KEY_ENTER)
        #expect(decode(euro) == [.line("€")])
        // Alt released without digits, and Alt+0 (NUL), type nothing.
        let nothing =
            [([Evdev.KEY_LEFTALT], Int32(1)), ([Evdev.KEY_LEFTALT], 0)] + tap(Evdev.KEY_X)
            + [([Evdev.KEY_LEFTALT], 1)] + tap(Evdev.KEY_KP0) + [([Evdev.KEY_LEFTALT], 0)] + tap(Evdev.KEY_ENTER)
        #expect(decode(nothing) == [.line("x")])
    }

    /// Ctrl+J (LF) and Ctrl+M (CR) stay in the line: only the suffix key ends it.
    @Test func controlCharactersNeverEndALine() {
        let steps =
            tap(Evdev.KEY_A) + tap(Evdev.KEY_LEFTCTRL, Evdev.KEY_J) + tap(Evdev.KEY_RIGHTCTRL, Evdev.KEY_M)
            + tap(Evdev.KEY_LEFTCTRL, Evdev.KEY_I) + tap(Evdev.KEY_B) + tap(Evdev.KEY_ENTER)
        #expect(decode(steps) == [.line("a\n\r\tb")])
        // A control character cancels a pending dead key: spacing form first (de: dead ^).
        let dead = tap(Evdev.KEY_GRAVE) + tap(Evdev.KEY_LEFTCTRL, Evdev.KEY_J) + tap(Evdev.KEY_ENTER)
        #expect(decode(dead, .de) == [.line("^\n")])
    }

    /// Num Lock starts on; pressing it turns the keypad into cursor keys (no characters), as xkb says.
    @Test func numLockFollowsXKB() {
        let digits = tap(Evdev.KEY_KP1) + tap(Evdev.KEY_KPDOT) + tap(Evdev.KEY_KP5)
        #expect(decode(digits + tap(Evdev.KEY_ENTER)) == [.line("1.5")])
        #expect(decode(digits + tap(Evdev.KEY_ENTER), .de) == [.line("1,5")])
        let off = tap(Evdev.KEY_NUMLOCK) + digits + tap(Evdev.KEY_A) + tap(Evdev.KEY_NUMLOCK) + digits
        #expect(decode(off + tap(Evdev.KEY_ENTER)) == [.line("a1.5")])
        var decoder = KeystrokeDecoder(layout: .us)
        _ = decoder.feed(InputEvent(type: Evdev.EV_LED, code: Evdev.LED_NUML, value: 0), now: 0)
        #expect(!decoder.numLock)
    }
}
