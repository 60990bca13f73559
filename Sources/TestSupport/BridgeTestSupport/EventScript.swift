import BridgeCore

/// Builds the evdev event sequences a keyboard-wedge scanner produces, for tests, benchmarks and
/// umockdev replays (pure: no I/O).
///
/// Each key press is a report (`MSC_SCAN` + `EV_KEY` 1 per key, then `SYN_REPORT`) and a release
/// report (`MSC_SCAN` + `EV_KEY` 0, `SYN_REPORT`), which is what the kernel's HID layer emits for a
/// boot-protocol keyboard. Modifiers come first within a report, as in a boot keyboard report.
public enum EventScript {
    /// Whether modifiers travel in the key's own report or in a report of their own before it.
    public enum ModifierStyle: Sendable, Equatable {
        /// Shift (AltGr) and key pressed in one report, released in one report.
        case sameReport
        /// Modifier pressed in its own report, then key press, key release, modifier release.
        case separateReport
    }

    /// How AltGr is sent.
    public enum AltGrStyle: Sendable, Equatable {
        /// `KEY_RIGHTALT`.
        case rightAlt
        /// `KEY_LEFTCTRL` + `KEY_LEFTALT` (what some scanners send in Windows mode).
        case controlAlt
    }

    /// Timing of the generated events, in microseconds.
    public struct Timing: Sendable, Equatable {
        /// Timestamp of the first event.
        public var start: Int64
        /// Press to release of a key.
        public var keyHold: Int64
        /// Release of one key to the press of the next.
        public var keyGap: Int64
        /// With `.separateReport`: modifier press to key press, and key release to modifier release.
        public var modifierLead: Int64

        public init(
            start: Int64 = 1_000_000, keyHold: Int64 = 2_000, keyGap: Int64 = 3_000, modifierLead: Int64 = 1_000
        ) {
            self.start = start
            self.keyHold = keyHold
            self.keyGap = keyGap
            self.modifierLead = modifierLead
        }
    }

    /// The events for typing `text` on `layout` then the suffix key (if any). Nil when the layout
    /// cannot type a character of `text` (the generator never guesses).
    public static func typing(
        _ text: String, layout: KeyboardLayout, suffix: KeystrokeDecoder.Suffix? = .enter,
        modifierStyle: ModifierStyle = .sameReport, altGrStyle: AltGrStyle = .rightAlt, timing: Timing = Timing()
    ) -> [InputEvent]? {
        var strokes: [Keystroke] = []
        for character in text {
            guard let sequence = layout.keystrokeSequence(for: character) else { return nil }
            strokes.append(contentsOf: sequence)
        }
        switch suffix {
        case .enter: strokes.append(Keystroke(code: Evdev.KEY_ENTER))
        case .tab: strokes.append(Keystroke(code: Evdev.KEY_TAB))
        case nil: break
        }
        return events(
            for: strokes, layout: layout, modifierStyle: modifierStyle, altGrStyle: altGrStyle, timing: timing)
    }

    /// The events for pressing and releasing each keystroke in turn.
    public static func events(
        for strokes: [Keystroke], layout: KeyboardLayout? = nil, modifierStyle: ModifierStyle = .sameReport,
        altGrStyle: AltGrStyle = .rightAlt, timing: Timing = Timing()
    ) -> [InputEvent] {
        var writer = Writer(iso: layout?.isISO ?? false, time: timing.start)
        for stroke in strokes {
            var mods: [UInt16] = []
            if stroke.altGr {
                mods += altGrStyle == .rightAlt ? [Evdev.KEY_RIGHTALT] : [Evdev.KEY_LEFTCTRL, Evdev.KEY_LEFTALT]
            }
            if stroke.shift {
                mods.append(Evdev.KEY_LEFTSHIFT)
            }
            if modifierStyle == .separateReport && !mods.isEmpty {
                writer.report(mods, value: 1)
                writer.time += timing.modifierLead
                writer.report([stroke.code], value: 1)
                writer.time += timing.keyHold
                writer.report([stroke.code], value: 0)
                writer.time += timing.modifierLead
                writer.report(mods, value: 0)
            } else {
                writer.report(mods + [stroke.code], value: 1)
                writer.time += timing.keyHold
                writer.report(mods + [stroke.code], value: 0)
            }
            writer.time += timing.keyGap
        }
        return writer.events
    }

    /// Appends `events` as evemu event lines, `E: <sec>.<usec> <type> <code> <value>` with type and
    /// code as 4 hex digits and value in decimal (evemu's `"E: %lu.%06u %04x %04x %d"`), one per line.
    /// This is the format `umockdev-run -e` and `evemu-play` replay.
    public static func evemuText(_ events: [InputEvent]) -> String {
        var text = ""
        text.reserveCapacity(events.count * 32)
        for event in events {
            text += "E: \(event.seconds).\(pad(String(event.microseconds), 6, "0")) "
            text += "\(pad(String(event.type, radix: 16), 4, "0")) \(pad(String(event.code, radix: 16), 4, "0")) "
            text += "\(event.value)\n"
        }
        return text
    }

    private static func pad(_ string: String, _ width: Int, _ fill: Character) -> String {
        string.count >= width ? string : String(repeating: fill, count: width - string.count) + string
    }

    /// Accumulates reports with timestamps.
    private struct Writer {
        let iso: Bool
        var time: Int64
        var events: [InputEvent] = []

        init(iso: Bool, time: Int64) {
            self.iso = iso
            self.time = time
        }

        mutating func report(_ codes: [UInt16], value: Int32) {
            for code in codes {
                if let scan = HIDUsage.scanValue(forKey: code, iso: iso) {
                    add(Evdev.EV_MSC, Evdev.MSC_SCAN, scan)
                }
                add(Evdev.EV_KEY, code, value)
            }
            add(Evdev.EV_SYN, Evdev.SYN_REPORT, 0)
        }

        private mutating func add(_ type: UInt16, _ code: UInt16, _ value: Int32) {
            let (seconds, micros) = time.quotientAndRemainder(dividingBy: 1_000_000)
            events.append(InputEvent(seconds: seconds, microseconds: micros, type: type, code: code, value: value))
        }
    }
}
