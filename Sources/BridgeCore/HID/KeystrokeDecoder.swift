/// Turns the evdev events of a keyboard-wedge barcode scanner into lines of text.
///
/// Feed every event read from the node, in order, with its time; the decoder reports complete lines
/// and discarded ones. It does no I/O and keeps no clock of its own.
///
/// Decisions (each also noted where it is implemented):
/// - Key presses are collected per report and decoded at `SYN_REPORT` with the modifier state at the
///   end of the report. A HID report is a snapshot, so Shift sent in its own report before the key,
///   Shift and key in the same report, and even the key before Shift in the same report all work.
///   Without `SYN_REPORT` nothing is decoded (every evdev node sends it).
/// - Modifiers: Left/Right Shift; Right Alt is AltGr; Ctrl+Alt (either side) is AltGr too, as on
///   Windows, since some scanners send that for AltGr characters and a Ctrl+Alt chord types nothing
///   otherwise. A key with Ctrl, Left Alt or Meta (and no AltGr) is a shortcut and types nothing
///   (GS1's GS sent as Ctrl+] is dropped this way).
/// - CapsLock toggles on press (deferred in order with the report's other presses); an `EV_LED`
///   `LED_CAPSL` event sets it to the LED state, which is what the host and a caps-compensating
///   scanner go by. `capsLock` can be initialised from `EVIOCGLED`.
/// - Autorepeat (value 2) is ignored: scanners never hold a key, and a release delayed past the
///   kernel's repeat delay would otherwise duplicate characters.
/// - Keys without a character (F-keys, arrows, Esc, Backspace, the other of Enter/Tab) are ignored.
/// - The suffix ends the line whatever modifiers are held. A dead key still pending at the suffix
///   is kept as its accent.
/// - Discarding: see `DiscardReason`. After an overlong line or `SYN_DROPPED` the decoder swallows
///   characters until the suffix or an inter-key timeout, so the tail of a broken line never comes
///   out as a line of its own.
/// - Inter-key timeout: a started line whose next key press comes `interKeyTimeout` or more after the
///   previous press is discarded, and the new key starts a fresh line; `tick(now:)` does the same
///   without a key. A half line is a failed scan (the scanner did not send its suffix): flushing it
///   would spool garbage, and the user rescans anyway.
/// - Time: pass the event's own timestamp when the node's clock is `CLOCK_MONOTONIC`
///   (`EVIOCSCLOCKID`), else the monotonic time of the `read` that returned it. With arrival times a
///   process stall longer than the timeout in the middle of a scan discards that scan; with event
///   times it does not. The I/O loop should drain readable data before calling `tick(now:)`.
public struct KeystrokeDecoder: Sendable {
    public let configuration: Configuration

    /// Whether CapsLock is on.
    public var capsLock = false

    /// Set by `SYN_DROPPED`: the key state is unknown (held keys were cleared); the I/O layer should
    /// read `EVIOCGKEY` and call `syncHeldKeys(fromBitmap:)`.
    public private(set) var needsKeyResync = false

    private enum Phase: Sendable {
        /// No line in progress.
        case idle
        /// Characters (or a dead key) collected for the current line.
        case collecting
        /// The current line is lost (overlong or dropped events): swallow until suffix or timeout.
        case swallowing
    }

    /// Modifier bits in `modifiers`.
    private enum Modifier {
        static let leftCtrl: UInt8 = 1
        static let rightCtrl: UInt8 = 2
        static let leftShift: UInt8 = 4
        static let rightShift: UInt8 = 8
        static let leftAlt: UInt8 = 16
        static let rightAlt: UInt8 = 32
        static let leftMeta: UInt8 = 64
        static let rightMeta: UInt8 = 128
        static let ctrl = leftCtrl | rightCtrl
        static let shift = leftShift | rightShift
        static let meta = leftMeta | rightMeta
    }

    /// Presses buffered before a report is flushed anyway (only malformed streams get there).
    private static let maxPressesPerReport = 32

    private let table: [UInt32]
    private let suffixCode: UInt16
    private let alternateSuffixCode: UInt16
    private let maxLineLength: Int
    private let timeout: Double?

    private var held = HeldKeys()
    private var modifiers: UInt8 = 0
    private var phase = Phase.idle
    /// The line so far, UTF-8; turned into a `String` only at the suffix.
    private var line: [UInt8] = []
    /// Unicode scalars in `line`.
    private var lineLength = 0
    /// Accent of a pending dead key, 0 if none.
    private var deadAccent: UInt32 = 0
    /// Presses of the current report, decoded at `SYN_REPORT`.
    private var reportPresses: [UInt16] = []
    /// After `SYN_DROPPED`: ignore everything up to and including the next `SYN_REPORT`.
    private var skippingToReport = false
    /// Time of the last key press.
    private var lastPressTime: Double = 0

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        table = configuration.layout.table
        switch configuration.suffix {
        case .enter:
            suffixCode = Evdev.KEY_ENTER
            alternateSuffixCode = Evdev.KEY_KPENTER
        case .tab:
            suffixCode = Evdev.KEY_TAB
            alternateSuffixCode = Evdev.KEY_TAB
        }
        maxLineLength = max(1, configuration.maxLineLength)
        // A zero, negative or non-finite timeout would discard every line: treat it as disabled.
        if let timeout = configuration.interKeyTimeout, timeout > 0, timeout.isFinite {
            self.timeout = timeout
        } else {
            self.timeout = nil
        }
        line.reserveCapacity(min(maxLineLength, 256) * 2)
        reportPresses.reserveCapacity(Self.maxPressesPerReport)
    }

    public init(
        layout: KeyboardLayout, suffix: Suffix = .enter, maxLineLength: Int = 4096, interKeyTimeout: Double? = 0.5
    ) {
        self.init(
            configuration: Configuration(
                layout: layout, suffix: suffix, maxLineLength: maxLineLength, interKeyTimeout: interKeyTimeout))
    }

    // MARK: - Held keys

    /// Whether any key is pressed. Grab the device only when this is false.
    public var anyKeyHeld: Bool { held.count > 0 }

    /// The pressed key codes, ascending (for logs).
    public var heldKeyCodes: [UInt16] { held.codes }

    /// Replaces the held-key state with an `EVIOCGKEY` bitmap (96 bytes; shorter means the rest are
    /// released, longer is truncated) and clears `needsKeyResync`.
    public mutating func syncHeldKeys(fromBitmap bitmap: some Sequence<UInt8>) {
        held = HeldKeys(bitmap: bitmap)
        modifiers = 0
        for code in [
            Evdev.KEY_LEFTCTRL, Evdev.KEY_RIGHTCTRL, Evdev.KEY_LEFTSHIFT, Evdev.KEY_RIGHTSHIFT,
            Evdev.KEY_LEFTALT, Evdev.KEY_RIGHTALT, Evdev.KEY_LEFTMETA, Evdev.KEY_RIGHTMETA,
        ] where held.contains(code) {
            modifiers |= Self.modifierBit(code)
        }
        needsKeyResync = false
    }

    // MARK: - Feeding

    /// Processes one event received at `now` (seconds, monotonic), passing any results to `emit`.
    /// One event yields at most a few outputs (a report can end one line and time out another).
    public mutating func feed(_ event: InputEvent, now: Double, emit: (Output) -> Void) {
        if skippingToReport {
            if event.type == Evdev.EV_SYN && event.code == Evdev.SYN_REPORT {
                skippingToReport = false
            }
            return
        }
        switch event.type {
        case Evdev.EV_KEY:
            handleKey(event.code, value: event.value, now: now, emit: emit)
        case Evdev.EV_SYN:
            if event.code == Evdev.SYN_REPORT {
                if !reportPresses.isEmpty {
                    flushReport(emit)
                }
            } else if event.code == Evdev.SYN_DROPPED {
                handleDropped(now: now, emit: emit)
            }
        case Evdev.EV_LED:
            if event.code == Evdev.LED_CAPSL {
                capsLock = event.value != 0
            }
        default:
            break
        }
    }

    /// Processes `event` and returns its outputs (convenience over `feed(_:now:emit:)`).
    public mutating func feed(_ event: InputEvent, now: Double) -> [Output] {
        var outputs: [Output] = []
        feed(event, now: now) { outputs.append($0) }
        return outputs
    }

    /// Processes `events` using each event's own timestamp as its time (tests, replays).
    public mutating func decode(_ events: some Sequence<InputEvent>) -> [Output] {
        var outputs: [Output] = []
        for event in events {
            feed(event, now: event.time) { outputs.append($0) }
        }
        return outputs
    }

    /// When a started line will time out (monotonic seconds), or nil if none is pending. The I/O loop
    /// uses it as its poll deadline and then calls `tick(now:)`.
    public func pendingDeadline() -> Double? {
        guard phase != .idle, let timeout else { return nil }
        return lastPressTime + timeout
    }

    /// Discards a started line whose inter-key timeout has passed at `now`. Returns
    /// `.discarded(.interKeyTimeout)` when characters were thrown away.
    public mutating func tick(now: Double) -> Output? {
        guard phase != .idle, let timeout, now - lastPressTime >= timeout else { return nil }
        return expireLine()
    }

    /// Forgets everything: line, held keys, CapsLock, pending report (after reopening the device).
    public mutating func reset() {
        resetLine()
        held.removeAll()
        modifiers = 0
        capsLock = false
        reportPresses.removeAll(keepingCapacity: true)
        skippingToReport = false
        needsKeyResync = false
    }

    // MARK: - Event handling

    @inline(__always)
    private static func modifierBit(_ code: UInt16) -> UInt8 {
        switch code {
        case Evdev.KEY_LEFTCTRL: return Modifier.leftCtrl
        case Evdev.KEY_RIGHTCTRL: return Modifier.rightCtrl
        case Evdev.KEY_LEFTSHIFT: return Modifier.leftShift
        case Evdev.KEY_RIGHTSHIFT: return Modifier.rightShift
        case Evdev.KEY_LEFTALT: return Modifier.leftAlt
        case Evdev.KEY_RIGHTALT: return Modifier.rightAlt
        case Evdev.KEY_LEFTMETA: return Modifier.leftMeta
        case Evdev.KEY_RIGHTMETA: return Modifier.rightMeta
        default: return 0
        }
    }

    private mutating func handleKey(_ code: UInt16, value: Int32, now: Double, emit: (Output) -> Void) {
        switch value {
        case 0:
            held.remove(code)
            modifiers &= ~Self.modifierBit(code)
        case 1:
            held.insert(code)
            // Any press, modifiers included, proves the scanner is typing; check the gap first.
            if phase != .idle, let timeout, now - lastPressTime >= timeout, let output = expireLine() {
                emit(output)
            }
            lastPressTime = now
            let bit = Self.modifierBit(code)
            if bit != 0 {
                modifiers |= bit
                return
            }
            if reportPresses.count >= Self.maxPressesPerReport {
                flushReport(emit)
            }
            reportPresses.append(code)
        default:
            // 2 = autorepeat: ignored on purpose (see type doc). Other values are invalid.
            break
        }
    }

    private mutating func flushReport(_ emit: (Output) -> Void) {
        var index = 0
        while index < reportPresses.count {
            decodePress(reportPresses[index], emit)
            index &+= 1
        }
        reportPresses.removeAll(keepingCapacity: true)
    }

    @inline(__always)
    private mutating func decodePress(_ code: UInt16, _ emit: (Output) -> Void) {
        if code == suffixCode || code == alternateSuffixCode {
            endLine(emit)
            return
        }
        if code == Evdev.KEY_CAPSLOCK {
            capsLock.toggle()
            return
        }
        guard Int(code) < KeyboardLayout.codeCount else { return }
        let mods = modifiers
        let ctrl = mods & Modifier.ctrl != 0
        let leftAlt = mods & Modifier.leftAlt != 0
        let altGr = mods & Modifier.rightAlt != 0 || (ctrl && leftAlt)
        if !altGr && (ctrl || leftAlt) || mods & Modifier.meta != 0 {
            return
        }
        let base = Int(code) &* 4
        let plain = table[base]
        let invert = capsLock && !altGr && plain & KeyboardLayout.capsFlag != 0
        let shifted = (mods & Modifier.shift != 0) != invert
        let entry = table[base | (shifted ? 1 : 0) | (altGr ? 2 : 0)]
        let scalar = entry & KeyboardLayout.scalarMask
        guard scalar != 0 else { return }
        if entry & KeyboardLayout.deadFlag != 0 {
            typeDeadKey(scalar, emit)
        } else {
            typeCharacter(scalar, emit)
        }
    }

    // MARK: - Line building

    @inline(__always)
    private mutating func typeCharacter(_ scalar: UInt32, _ emit: (Output) -> Void) {
        if deadAccent != 0 {
            let accent = deadAccent
            deadAccent = 0
            let (first, second) = DeadKeyComposer.compose(accent: accent, next: scalar)
            append(first, emit)
            if let second {
                append(second, emit)
            }
        } else {
            append(scalar, emit)
        }
    }

    private mutating func typeDeadKey(_ accent: UInt32, _ emit: (Output) -> Void) {
        guard phase != .swallowing else { return }
        if deadAccent != 0 {
            // Two dead keys in a row: both accents, literally (Windows behaviour).
            let pending = deadAccent
            deadAccent = 0
            append(pending, emit)
            append(accent, emit)
            return
        }
        deadAccent = accent
        phase = .collecting
    }

    @inline(__always)
    private mutating func append(_ scalar: UInt32, _ emit: (Output) -> Void) {
        switch phase {
        case .swallowing:
            return
        case .idle:
            phase = .collecting
        case .collecting:
            break
        }
        guard lineLength < maxLineLength else {
            // Report once, then swallow the rest of this line up to its suffix.
            resetLine()
            phase = .swallowing
            emit(.discarded(.overlong))
            return
        }
        lineLength &+= 1
        if scalar < 0x80 {
            line.append(UInt8(truncatingIfNeeded: scalar))
        } else if let unicode = Unicode.Scalar(scalar) {
            UTF8.encode(unicode) { line.append($0) }
        }
    }

    private mutating func endLine(_ emit: (Output) -> Void) {
        if phase == .collecting && deadAccent != 0 {
            let accent = deadAccent
            deadAccent = 0
            append(accent, emit)
        }
        if phase == .collecting && lineLength > 0 {
            emit(.line(String(decoding: line, as: UTF8.self)))
        }
        resetLine()
    }

    /// Ends a started line for the inter-key timeout; silent if it was already being swallowed.
    private mutating func expireLine() -> Output? {
        let wasCollecting = phase == .collecting
        resetLine()
        return wasCollecting ? .discarded(.interKeyTimeout) : nil
    }

    private mutating func handleDropped(now: Double, emit: (Output) -> Void) {
        // Events were lost: this line, and the next one up to its suffix, may miss keys.
        let lostSomething = phase != .swallowing
        resetLine()
        phase = .swallowing
        lastPressTime = now
        reportPresses.removeAll(keepingCapacity: true)
        held.removeAll()
        modifiers = 0
        skippingToReport = true
        needsKeyResync = true
        if lostSomething {
            emit(.discarded(.synDropped))
        }
    }

    private mutating func resetLine() {
        line.removeAll(keepingCapacity: true)
        lineLength = 0
        deadAccent = 0
        phase = .idle
    }
}
