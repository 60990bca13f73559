import BridgeCore
import Testing

/// `hid.passThrough`'s record of a line's keys (`TypedKeys`), against the evdev protocol (the kernel's
/// Documentation/input/event-codes.rst: EV_KEY value 1 press, 0 release, 2 autorepeat) and the key codes of
/// linux/input-event-codes.h. The virtual keyboard itself is proven through a real kernel in the guest
/// (scripts/clock-step-test) and, where /dev/uinput is absent, in `UmockdevTests`.
@Suite struct PassThroughTests {
    // linux/input-event-codes.h
    static let shift: UInt16 = 42, a: UInt16 = 30, b: UInt16 = 48, enter: UInt16 = 28, c: UInt16 = 46

    static func key(_ code: UInt16, _ value: Int32, at ms: Int64 = 0) -> InputEvent {
        InputEvent(seconds: 0, microseconds: ms * 1000, type: Evdev.EV_KEY, code: code, value: value)
    }

    @Test func aLineIsItsOwnPressesAndReleasesWithTheSuffixReleasedAtItsEnd() {
        var keys = TypedKeys()
        // "Ab" and Enter, as a scanner types it: Shift around A, SYN_REPORTs and MSC_SCAN records in between.
        let typed = [
            Self.key(Self.shift, 1, at: 0), Self.key(Self.a, 1, at: 2), Self.key(Self.a, 0, at: 4),
            Self.key(Self.shift, 0, at: 6), Self.key(Self.b, 1, at: 8), Self.key(Self.b, 0, at: 10),
            Self.key(Self.enter, 1, at: 12),
        ]
        for event in typed {
            keys.record(event)
            keys.record(InputEvent(type: Evdev.EV_MSC, code: 4, value: 0x70004))
            keys.record(InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0))
        }
        // The decoder ends the line at Enter's press; Enter is still held.
        let line = keys.finishLine()
        #expect(line == typed + [Self.key(Self.enter, 0, at: 12)])
        // Enter's real release belongs to the line above: the next line starts with its own keys only.
        keys.record(Self.key(Self.enter, 0, at: 14))
        keys.record(Self.key(Self.c, 1, at: 20))
        keys.record(Self.key(Self.c, 2, at: 520))  // autorepeat: the kernel's, not the scanner's
        keys.record(Self.key(Self.c, 0, at: 530))
        keys.record(Self.key(Self.enter, 1, at: 540))
        keys.record(Self.key(Self.enter, 0, at: 542))
        #expect(
            keys.finishLine() == [
                Self.key(Self.c, 1, at: 20), Self.key(Self.c, 0, at: 530), Self.key(Self.enter, 1, at: 540),
                Self.key(Self.enter, 0, at: 542),
            ])
    }

    @Test func aReleaseOfAKeyPressedBeforeTheLineIsNotTheLines() {
        var keys = TypedKeys()
        keys.record(Self.key(Self.shift, 0))
        keys.record(Self.key(Self.a, 1))
        keys.record(Self.key(Self.a, 0))
        #expect(keys.finishLine() == [Self.key(Self.a, 1), Self.key(Self.a, 0)])
    }

    @Test func aDiscardedLineLeavesNothingBehind() {
        var keys = TypedKeys()
        keys.record(Self.key(Self.a, 1))
        keys.discardLine()
        keys.record(Self.key(Self.a, 0))  // the dropped line's key, released now
        keys.record(Self.key(Self.b, 1))
        keys.record(Self.key(Self.b, 0))
        #expect(keys.finishLine() == [Self.key(Self.b, 1), Self.key(Self.b, 0)])
    }

    @Test func theModesRetypeWhatTheirNamesSay() {
        #expect(!PassThrough.none.retypes(recognized: false) && !PassThrough.none.retypes(recognized: true))
        #expect(
            PassThrough.unrecognized.retypes(recognized: false) && !PassThrough.unrecognized.retypes(recognized: true))
        #expect(PassThrough.all.retypes(recognized: false) && PassThrough.all.retypes(recognized: true))
    }
}
