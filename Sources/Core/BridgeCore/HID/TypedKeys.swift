/// What `hid.passThrough` re-types for a code (docs/configuration.md, "`hid`").
public enum PassThrough: String, Sendable, CaseIterable {
    /// Codes go to plings-bridge only (the scanner is grabbed).
    case none
    /// Codes that are not Plings URLs are also typed to the desktop.
    case unrecognized
    /// Every code is also typed to the desktop.
    case all

    /// Whether a code of this kind is re-typed.
    public func retypes(recognized: Bool) -> Bool {
        switch self {
        case .none: return false
        case .unrecognized: return !recognized
        case .all: return true
        }
    }
}

/// The key presses and releases of one scanned line exactly as the scanner sent them, for re-typing them on a
/// virtual keyboard (`hid.passThrough`): layout, dead keys and modifiers come out as the scanner typed them, since
/// they are its own key codes, not characters turned back into keys.
///
/// Fed every event of one scanner in order; `finishLine()` when the decoder ends a line at its suffix (the press),
/// `discardLine()` when the decoder drops one. Auto-repeats (value 2) are left out: a scanner's repeat is the
/// kernel's, and the virtual keyboard's own repeat follows from the press. A release of a key pressed before the
/// line began belongs to the line before; a key still held when a line ends is released at its end, and its real
/// release later is skipped, so every line re-typed presses and releases each key it pressed.
public struct TypedKeys: Sendable {
    private var events: [InputEvent] = []
    private var held: Set<UInt16> = []
    /// Keys a finished line released already: their real release is skipped.
    private var releasedEarly: Set<UInt16> = []

    public init() {}

    /// Records one event (anything but a key press or release is ignored).
    public mutating func record(_ event: InputEvent) {
        guard event.type == Evdev.EV_KEY, event.value == 0 || event.value == 1 else { return }
        if event.value == 1 {
            releasedEarly.remove(event.code)
            held.insert(event.code)
        } else {
            if releasedEarly.remove(event.code) != nil { return }
            guard held.remove(event.code) != nil else { return }
        }
        events.append(event)
    }

    /// The line's keys, every key it pressed released (a key still held at the suffix is released with the last
    /// event's time); recording starts afresh.
    public mutating func finishLine() -> [InputEvent] {
        var line = events
        let last = events.last
        for code in held.sorted() {
            line.append(
                InputEvent(
                    seconds: last?.seconds ?? 0, microseconds: last?.microseconds ?? 0, type: Evdev.EV_KEY, code: code,
                    value: 0))
        }
        discardLine()
        return line
    }

    /// Forgets the line so far (the decoder dropped it); keys still held are the line's, not the next one's.
    public mutating func discardLine() {
        releasedEarly.formUnion(held)
        held.removeAll(keepingCapacity: true)
        events.removeAll(keepingCapacity: true)
    }
}
