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
/// - Modifiers: what each modifier key does comes from the layout (xkb): Shift, AltGr (LevelThree: Right
///   Alt on most European layouts, plain Alt on `us`), Control. Ctrl+Alt is AltGr too on layouts that
///   have AltGr, as on Windows, since some scanners send that for AltGr characters.
/// - Ctrl with a key gives the control character xkb gives (Ctrl+] = GS, the GS1 separator); a Ctrl
///   chord that yields no control character is a shortcut and types nothing. Alt (not AltGr) with keypad
///   digits is a Windows Alt code: the decimal number typed while Alt is held becomes one character when
///   Alt is released (Alt+0029 = GS); with a leading 0, 128...159 follow Windows-1252, otherwise the number
///   is the Unicode scalar. Alt with any other key, and Meta, are shortcuts and type nothing. Control
///   characters stay in the line: only the suffix key ends it.
/// - CapsLock and NumLock toggle on press (deferred in order with the report's other presses) and act as
///   xkb says (the table has a state per lock); an `EV_LED` `LED_CAPSL`/`LED_NUML` event sets them to the
///   LED state, which is what the host and a caps-compensating scanner go by. NumLock starts on (scanners
///   in keypad-emulation mode rely on it), CapsLock off; `capsLock` can be initialised from `EVIOCGLED`.
/// - Dead keys compose through the layout's `ComposeTable` (the system's compose table, as xkb does):
///   dead key + a key it combines with gives the composed text, + a key it does not combine with gives the
///   dead key's spacing form and then that key's character. A dead key still pending at the suffix types
///   its spacing form.
/// - Autorepeat (value 2) is ignored: scanners never hold a key, and a release delayed past the
///   kernel's repeat delay would otherwise duplicate characters.
/// - Keys without a character (F-keys, arrows, Esc, Backspace, the other of Enter/Tab) are ignored.
/// - The suffix ends the line whatever modifiers are held.
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
    /// Whether NumLock is on.
    public var numLock = true

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

    private typealias Role = KeyboardLayout.Role
    private typealias State = KeyboardLayout.State

    /// Presses buffered before a report is flushed anyway (only malformed streams get there).
    private static let maxPressesPerReport = 32

    private let table: [UInt32]
    private let compose: ComposeTable
    /// `modifiers` (one bit per key of `KeyboardLayout.modifierKeys`) -> the `Role` bits they make together.
    private let roles: [UInt8]
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
    /// Compose node of the pending dead key(s), 0 if none; `pendingDeads` are their ids, in order.
    private var composeNode: UInt32 = 0
    private var pendingDeads: [UInt32] = []
    /// The Alt code typed so far on the keypad (`altDigits` digits, the first of them 0 if `altLeadingZero`).
    private var altCode: UInt32 = 0
    private var altDigits = 0
    private var altLeadingZero = false
    /// Presses of the current report, decoded at `SYN_REPORT`.
    private var reportPresses: [UInt16] = []
    /// After `SYN_DROPPED`: ignore everything up to and including the next `SYN_REPORT`.
    private var skippingToReport = false
    /// Time of the last key press.
    private var lastPressTime: Double = 0

    public init(configuration: Configuration) {
        self.configuration = configuration
        let layout = configuration.layout
        table = layout.table
        compose = layout.compose
        roles = (0..<256).map { bits in Self.combinedRoles(bits: bits, layout: layout) }
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

    /// What the modifier keys in `bits` do together on `layout`.
    private static func combinedRoles(bits: Int, layout: KeyboardLayout) -> UInt8 {
        var role: UInt8 = 0
        for (index, keyRole) in layout.modifierRoles.enumerated() where bits & (1 << index) != 0 {
            role |= keyRole
        }
        // Ctrl+Alt as AltGr (Windows), only where the layout has an AltGr level at all.
        if role & Role.control != 0, role & Role.alt != 0, role & Role.level3 == 0, layout.hasLevel3 {
            role = role & ~(Role.control | Role.alt) | Role.level3
        }
        return role
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
        for code in KeyboardLayout.modifierKeys where held.contains(code) {
            modifiers |= Self.modifierBit(code)
        }
        resetAltCode()
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
            } else if event.code == Evdev.LED_NUML {
                numLock = event.value != 0
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
        numLock = true
        resetAltCode()
        reportPresses.removeAll(keepingCapacity: true)
        skippingToReport = false
        needsKeyResync = false
    }

    // MARK: - Event handling

    /// The bit of `modifiers` for a modifier key (the order of `KeyboardLayout.modifierKeys`), 0 for others.
    @inline(__always)
    private static func modifierBit(_ code: UInt16) -> UInt8 {
        switch code {
        case Evdev.KEY_LEFTCTRL: return 1
        case Evdev.KEY_RIGHTCTRL: return 2
        case Evdev.KEY_LEFTSHIFT: return 4
        case Evdev.KEY_RIGHTSHIFT: return 8
        case Evdev.KEY_LEFTALT: return 16
        case Evdev.KEY_RIGHTALT: return 32
        case Evdev.KEY_LEFTMETA: return 64
        case Evdev.KEY_RIGHTMETA: return 128
        default: return 0
        }
    }

    private mutating func handleKey(_ code: UInt16, value: Int32, now: Double, emit: (Output) -> Void) {
        switch value {
        case 0:
            held.remove(code)
            let bit = Self.modifierBit(code)
            guard bit != 0 else { return }
            let altBefore = roles[Int(modifiers)] & Role.alt != 0
            if altBefore && altDigits > 0 && roles[Int(modifiers & ~bit)] & Role.alt == 0 {
                // Alt released after keypad digits: the presses of this report came first, then the code.
                if !reportPresses.isEmpty { flushReport(emit) }
                modifiers &= ~bit
                finishAltCode(emit)
                return
            }
            modifiers &= ~bit
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
        if code == Evdev.KEY_NUMLOCK {
            numLock.toggle()
            return
        }
        guard Int(code) < KeyboardLayout.codeCount else { return }
        let role = roles[Int(modifiers)]
        if role & (Role.alt | Role.meta) != 0 {
            if role & Role.meta == 0, let digit = KeyboardLayout.keypadDigit(code) {
                if altDigits == 0 { altLeadingZero = digit == 0 }
                altDigits &+= 1
                altCode = min(altCode &* 10 &+ digit, 0x11_0000)
            }
            return
        }
        let state =
            role & (State.shift | State.level3 | State.control) | (capsLock ? State.capsLock : 0)
            | (numLock ? State.numLock : 0)
        let entry = table[Int(code) &* KeyboardLayout.stateCount &+ Int(state)]
        guard entry != 0 else { return }
        if entry & KeyboardLayout.deadFlag != 0 {
            typeDeadKey(entry & KeyboardLayout.scalarMask, emit)
        } else {
            typeCharacter(entry, emit)
        }
    }

    private mutating func resetAltCode() {
        altCode = 0
        altDigits = 0
        altLeadingZero = false
    }

    /// Types the character of a finished Alt code; NUL and values that are no Unicode scalar type nothing.
    private mutating func finishAltCode(_ emit: (Output) -> Void) {
        var value = altCode
        if altLeadingZero, (0x80...0x9F).contains(value) {
            value = Self.windows1252[Int(value - 0x80)]
        }
        resetAltCode()
        guard value != 0, Unicode.Scalar(value) != nil else { return }
        typeCharacter(value, emit)
    }

    /// Windows-1252 bytes 0x80...0x9F as Unicode (the five unassigned bytes map to the C1 controls, as Windows
    /// does).
    private static let windows1252: [UInt32] = [
        0x20AC, 0x81, 0x201A, 0x192, 0x201E, 0x2026, 0x2020, 0x2021, 0x2C6, 0x2030, 0x160, 0x2039, 0x152, 0x8D,
        0x17D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x2DC, 0x2122, 0x161, 0x203A,
        0x153, 0x9D, 0x17E, 0x178,
    ]

    // MARK: - Line building

    @inline(__always)
    private mutating func typeCharacter(_ scalar: UInt32, _ emit: (Output) -> Void) {
        if composeNode != 0 {
            composeCharacter(scalar, emit)
        } else {
            append(scalar, emit)
        }
    }

    /// A character after dead keys: the composed text, or the dead keys' spacing forms and the character.
    private mutating func composeCharacter(_ scalar: UInt32, _ emit: (Output) -> Void) {
        if case .text(let text)? = compose.step(node: composeNode, symbol: scalar) {
            clearCompose()
            for value in text { append(value, emit) }
        } else {
            typePendingDeads(emit)
            append(scalar, emit)
        }
    }

    private mutating func typeDeadKey(_ id: UInt32, _ emit: (Output) -> Void) {
        guard phase != .swallowing else { return }
        if composeNode != 0 {
            switch compose.step(node: composeNode, symbol: ComposeTable.deadSymbol | id) {
            case .node(let next)?:
                composeNode = next
                pendingDeads.append(id)
                return
            case .text(let text)?:
                clearCompose()
                for value in text { append(value, emit) }
                return
            case nil:
                // Does not combine: the pending ones type their spacing forms, this one starts anew.
                typePendingDeads(emit)
                guard phase != .swallowing else { return }
            }
        }
        composeNode = id
        pendingDeads.append(id)
        phase = .collecting
    }

    /// Types the spacing forms of the pending dead keys and ends the compose sequence.
    private mutating func typePendingDeads(_ emit: (Output) -> Void) {
        let deads = pendingDeads
        clearCompose()
        for id in deads where Int(id) < compose.spacing.count {
            for value in compose.spacing[Int(id)] { append(value, emit) }
        }
    }

    private mutating func clearCompose() {
        composeNode = 0
        pendingDeads.removeAll(keepingCapacity: true)
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
        if phase == .collecting && composeNode != 0 {
            typePendingDeads(emit)
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
        clearCompose()
        phase = .idle
    }
}
