/// One key press as a keyboard would send it: an evdev key code plus the modifiers held with it.
public struct Keystroke: Sendable, Equatable, Hashable {
    public var code: UInt16
    public var shift: Bool
    public var altGr: Bool

    public init(code: UInt16, shift: Bool = false, altGr: Bool = false) {
        self.code = code
        self.shift = shift
        self.altGr = altGr
    }
}

/// Maps evdev key codes and modifier states to the characters a host with this keyboard layout types.
///
/// A keyboard-wedge scanner is configured for a "keyboard country" and sends, for each character of the
/// barcode, the key presses that produce it on a host with that layout, so decoding needs the host's table.
/// The table is not written here: the HID module compiles it from xkb-data through libxkbcommon once per
/// layout (`XKBLayouts`), and this type only holds the result, so the decoder does one array lookup per key
/// and BridgeCore stays free of I/O.
///
/// The table has `stateCount` entries per key code, indexed by the modifier state bits below (xkb's own
/// Shift, Lock, LevelThree, NumLock and Control modifiers). Each entry is a Unicode scalar (0 = the press
/// types nothing), or `deadFlag` plus a dead-key id into `compose`.
public struct KeyboardLayout: Sendable, Equatable, CustomStringConvertible {
    /// The name as configured and shown: xkb layout, with the variant in parentheses (`de(nodeadkeys)`).
    public let name: String
    /// xkb-data's description ("German (no dead keys)").
    public let displayName: String
    /// `code * stateCount + state` -> scalar, or `deadFlag | id`.
    let table: [UInt32]
    /// What each of the eight modifier keys does on this layout (`Role` bits), in the order of
    /// `modifierKeys`: on `us` Right Alt is Alt, on most European layouts it is AltGr (LevelThree).
    public let modifierRoles: [UInt8]
    /// Dead keys and the compose sequences they start.
    public let compose: ComposeTable
    /// Whether the key left of Enter is the ISO "non-US #" key (HID usage 0x32) rather than the ANSI
    /// backslash (0x31): the layout has the extra ISO key (`KEY_102ND`).
    public let isISO: Bool

    /// Key codes covered by the table (the main block, keypad and the ISO/JIS extra keys are below 128).
    public static let codeCount = 128
    /// Modifier states per key code.
    public static let stateCount = 32
    public static let scalarMask: UInt32 = 0x1F_FFFF
    public static let deadFlag: UInt32 = 1 << 30

    /// Bits of a table state.
    public enum State {
        public static let shift: UInt8 = 1
        public static let capsLock: UInt8 = 2
        public static let level3: UInt8 = 4
        public static let numLock: UInt8 = 8
        public static let control: UInt8 = 16
    }

    /// What a modifier key does (bits of `modifierRoles`).
    public enum Role {
        public static let shift: UInt8 = 1
        public static let level3: UInt8 = 4
        public static let control: UInt8 = 16
        public static let alt: UInt8 = 32
        public static let meta: UInt8 = 64
    }

    /// The eight modifier keys, in the order of `modifierRoles`.
    public static let modifierKeys: [UInt16] = [
        Evdev.KEY_LEFTCTRL, Evdev.KEY_RIGHTCTRL, Evdev.KEY_LEFTSHIFT, Evdev.KEY_RIGHTSHIFT,
        Evdev.KEY_LEFTALT, Evdev.KEY_RIGHTALT, Evdev.KEY_LEFTMETA, Evdev.KEY_RIGHTMETA,
    ]

    public var description: String { name }

    /// A layout from a compiled table (`table.count` must be `codeCount * stateCount`).
    public init(
        name: String, displayName: String, table: [UInt32], modifierRoles: [UInt8], compose: ComposeTable,
        isISO: Bool
    ) {
        precondition(table.count == Self.codeCount * Self.stateCount, "layout table has the wrong size")
        precondition(modifierRoles.count == Self.modifierKeys.count, "one role per modifier key")
        self.name = name
        self.displayName = displayName
        self.table = table
        self.modifierRoles = modifierRoles
        self.compose = compose
        self.isISO = isISO
    }

    /// Whether some modifier key of this layout is AltGr.
    public var hasLevel3: Bool { modifierRoles.contains { $0 & Role.level3 != 0 } }

    // MARK: - Lookup

    @inline(__always)
    func entry(code: UInt16, state: UInt8) -> UInt32 {
        guard Int(code) < Self.codeCount else { return 0 }
        return table[Int(code) &* Self.stateCount &+ Int(state)]
    }

    static func state(shift: Bool, altGr: Bool, capsLock: Bool = false, numLock: Bool = true) -> UInt8 {
        (shift ? State.shift : 0) | (altGr ? State.level3 : 0) | (capsLock ? State.capsLock : 0)
            | (numLock ? State.numLock : 0)
    }

    /// The character `code` types with these modifiers (NumLock on), or nil when it types nothing or is a
    /// dead key.
    public func character(forKey code: UInt16, shift: Bool, altGr: Bool, capsLock: Bool = false) -> Character? {
        let value = entry(code: code, state: Self.state(shift: shift, altGr: altGr, capsLock: capsLock))
        guard value & Self.deadFlag == 0, value != 0, let scalar = Unicode.Scalar(value) else { return nil }
        return Character(scalar)
    }

    /// Whether `code` with these modifiers is a dead key.
    public func isDeadKey(_ code: UInt16, shift: Bool, altGr: Bool) -> Bool {
        entry(code: code, state: Self.state(shift: shift, altGr: altGr)) & Self.deadFlag != 0
    }

    // MARK: - Reverse mapping (for generators, benchmarks and tests)

    /// The single key press typing `character` without dead keys, preferring fewer modifiers and the main
    /// block over the keypad; nil when the layout needs a dead-key sequence or cannot type it.
    public func keystrokes(for character: Character) -> (code: UInt16, shift: Bool, altGr: Bool)? {
        guard let stroke = findStroke({ $0 == Self.scalarValue(character) }) else { return nil }
        return (stroke.code, stroke.shift, stroke.altGr)
    }

    /// The key presses typing `character`: one press, or a dead key followed by Space (or by itself) when the
    /// compose table gives the character for that. Nil when the layout cannot type it so.
    public func keystrokeSequence(for character: Character) -> [Keystroke]? {
        guard let wanted = Self.scalarValue(character) else { return nil }
        if let stroke = findStroke({ $0 == wanted }) {
            return [stroke]
        }
        let viaSpace = findStroke { entry in
            entry & Self.deadFlag != 0 && compose.step(node: entry & Self.scalarMask, symbol: 0x20) == .text([wanted])
        }
        if let viaSpace { return [viaSpace, Keystroke(code: Evdev.KEY_SPACE)] }
        let twice = findStroke { entry in
            let id = entry & Self.scalarMask
            return entry & Self.deadFlag != 0
                && compose.step(node: id, symbol: ComposeTable.deadSymbol | id) == .text([wanted])
        }
        return twice.map { [$0, $0] }
    }

    /// Every character one key press types at the plain, Shift, AltGr and Shift+AltGr levels (NumLock on),
    /// each once, in table order.
    public var characters: [Character] {
        var seen = Set<UInt32>()
        var result: [Character] = []
        for level in Self.levels where hasLevel3 || level & State.level3 == 0 {
            for code in 0..<Self.codeCount {
                let value = table[code * Self.stateCount + Int(level)]
                guard value & Self.deadFlag == 0, value >= 0x20, let scalar = Unicode.Scalar(value) else { continue }
                if seen.insert(value).inserted { result.append(Character(scalar)) }
            }
        }
        return result
    }

    private static let levels: [UInt8] = [
        state(shift: false, altGr: false), state(shift: true, altGr: false), state(shift: false, altGr: true),
        state(shift: true, altGr: true),
    ]

    private static func scalarValue(_ character: Character) -> UInt32? {
        character.unicodeScalars.count == 1 ? character.unicodeScalars.first?.value : nil
    }

    private func findStroke(_ matches: (UInt32) -> Bool) -> Keystroke? {
        for keypad in [false, true] {
            for level in Self.levels where hasLevel3 || level & State.level3 == 0 {
                for code in 0..<Self.codeCount where Self.isKeypad(UInt16(code)) == keypad {
                    if matches(table[code * Self.stateCount + Int(level)]) {
                        return Keystroke(
                            code: UInt16(code), shift: level & State.shift != 0, altGr: level & State.level3 != 0)
                    }
                }
            }
        }
        return nil
    }

    static func isKeypad(_ code: UInt16) -> Bool {
        (Evdev.KEY_KP7...Evdev.KEY_KPDOT).contains(code) || code == Evdev.KEY_KPASTERISK
            || code == Evdev.KEY_KPSLASH || code == Evdev.KEY_KPENTER
    }

    /// The digit a keypad key stands for in an Alt+numpad code (by position, whatever NumLock says).
    @inline(__always)
    static func keypadDigit(_ code: UInt16) -> UInt32? {
        switch code {
        case Evdev.KEY_KP0: return 0
        case Evdev.KEY_KP1: return 1
        case Evdev.KEY_KP2: return 2
        case Evdev.KEY_KP3: return 3
        case Evdev.KEY_KP4: return 4
        case Evdev.KEY_KP5: return 5
        case Evdev.KEY_KP6: return 6
        case Evdev.KEY_KP7: return 7
        case Evdev.KEY_KP8: return 8
        case Evdev.KEY_KP9: return 9
        default: return nil
        }
    }
}

/// The compose sequences that start with a layout's dead keys, taken from the system's compose table when the
/// layout is compiled (so the decoder never calls into libxkbcommon per key).
///
/// Nodes: 0 is "nothing pending"; 1...n are "dead key n pressed" (the ids in layout entries); deeper nodes
/// (two dead keys) follow. A step is keyed by the node and the next symbol: a Unicode scalar, or
/// `deadSymbol | id` for another dead key. A missing step cancels the sequence: the pending dead keys type
/// their spacing forms, then the key that cancelled types its own character.
public struct ComposeTable: Sendable, Equatable {
    /// Where a symbol leads from a node.
    public enum Step: Sendable, Equatable {
        /// Still composing (another dead key).
        case node(UInt32)
        /// The sequence is complete and types this text.
        case text([UInt32])
    }

    public static let deadSymbol: UInt32 = 1 << 31

    /// The spacing form of each dead key (index = id; index 0 unused), what it types when cancelled.
    public let spacing: [[UInt32]]
    let steps: [UInt64: Step]

    public init(spacing: [[UInt32]], steps: [UInt64: Step]) {
        self.spacing = spacing
        self.steps = steps
    }

    /// A table with no dead keys.
    public static let empty = ComposeTable(spacing: [[]], steps: [:])

    @inline(__always)
    public static func key(node: UInt32, symbol: UInt32) -> UInt64 {
        UInt64(node) << 32 | UInt64(symbol)
    }

    /// The step from `node` on `symbol`, or nil when the symbol cancels the sequence.
    public func step(node: UInt32, symbol: UInt32) -> Step? {
        steps[Self.key(node: node, symbol: symbol)]
    }
}
