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

/// Maps evdev key codes to the characters a host with this keyboard layout would type.
///
/// A keyboard-wedge scanner is configured for a "country keyboard" and sends, for each character of
/// the barcode, the key presses that produce that character on a host using that layout. Decoding
/// therefore needs the same table the host would use.
///
/// Decisions:
/// - Tables follow the Windows layouts of the same name, because that is what scanner "country"
///   settings emulate. Where Windows and Linux xkb differ, Windows wins (on `fr`, AltGr+2 `~` and
///   AltGr+7 `` ` `` are dead keys on Windows and plain in xkb; digits under CapsLock).
/// - Coverage is what a barcode can plausibly contain: all printable ASCII, the layout's national
///   letters and common symbols (£ € § ° ¤ µ ² ½ ´ ¨). Exotic xkb level-3 glyphs are left out.
/// - Each key has four levels: plain, Shift, AltGr, Shift+AltGr. A level with no character means the
///   press types nothing.
/// - CapsLock inverts Shift on keys it affects, and only when AltGr is not held: every key whose Shift
///   level is the upper case of its plain level (letters, including å ä ö ü), plus the digit row on
///   `fr` (Windows AZERTY "Verr. Maj." types digits, so é è ç à give 2 7 9 0). The `de`/`se`/`uk`/`us`
///   digit rows, `ß` and `fr` `ù` are not affected.
/// - Dead keys (`de` ^ ´ `; `se` ´ ` ¨ ^ ~; `fr` ^ ¨ and AltGr ~ `) are decoded like Windows does: the
///   dead key followed by Space gives the accent itself, followed by a letter it composes with gives
///   the composed letter (â), followed by anything else gives the accent then that character.
///   Scanners type a literal `^` on such layouts as dead key + Space.
/// - Keypad keys type their digit or operator whatever NumLock/Shift say (NumLock is assumed on:
///   scanners in "keypad emulation" mode rely on it); `KPDOT` is `,` on `de` and `se`.
public struct KeyboardLayout: Sendable, Equatable, CustomStringConvertible {
    /// Short name used in configuration (`us`, `se`, `de`, `uk`, `fr`).
    public let name: String
    /// Human-readable name for logs.
    public let displayName: String
    /// Four entries per key code (`code * 4 + level`, level = shift | altGr << 1); each entry is a
    /// Unicode scalar value (0 = none) plus `deadFlag`; the plain-level entry also carries `capsFlag`.
    let table: [UInt32]
    /// Whether the layout has the ISO key between left Shift and Z, and the key left of Enter is the
    /// ISO "non-US #" key (HID usage 0x32) rather than the ANSI backslash (0x31).
    let isISO: Bool

    /// Key codes covered by the table.
    static let codeCount = 128
    static let scalarMask: UInt32 = 0x1F_FFFF
    static let deadFlag: UInt32 = 1 << 30
    static let capsFlag: UInt32 = 1 << 29

    public var description: String { name }

    /// Builds a layout. `keys` gives, per code, a string whose Unicode scalars are the characters of
    /// levels plain, Shift, AltGr, Shift+AltGr in order (shorter strings leave higher levels empty;
    /// U+0000 marks an empty level in the middle). `dead` lists (code, level) pairs that are dead keys.
    init(
        name: String, displayName: String, isISO: Bool, keys: [(UInt16, String)],
        dead: [(UInt16, Int)] = [], capsLockKeys: [UInt16] = []
    ) {
        var table = [UInt32](repeating: 0, count: Self.codeCount * 4)
        for (code, spec) in keys {
            precondition(Int(code) < Self.codeCount, "layout table key code out of range")
            for (level, scalar) in spec.unicodeScalars.prefix(4).enumerated() {
                table[Int(code) * 4 + level] = scalar.value
            }
            let scalars = Array(spec.unicodeScalars)
            if scalars.count >= 2, Self.isCasePair(lower: scalars[0], upper: scalars[1]) {
                table[Int(code) * 4] |= Self.capsFlag
            }
        }
        for code in capsLockKeys {
            table[Int(code) * 4] |= Self.capsFlag
        }
        for (code, level) in dead {
            precondition(Int(code) < Self.codeCount && (0..<4).contains(level), "dead key out of range")
            table[Int(code) * 4 + level] |= Self.deadFlag
        }
        self.name = name
        self.displayName = displayName
        self.isISO = isISO
        self.table = table
    }

    private static func isCasePair(lower: Unicode.Scalar, upper: Unicode.Scalar) -> Bool {
        lower.properties.isLowercase && lower.properties.uppercaseMapping == String(upper)
    }

    // MARK: - Lookup

    @inline(__always)
    func entry(code: UInt16, level: Int) -> UInt32 {
        guard Int(code) < Self.codeCount else { return 0 }
        return table[Int(code) &* 4 &+ level]
    }

    /// The character `code` types with these modifiers (for a dead key: the accent it stands for), or
    /// nil when it types nothing.
    public func character(forKey code: UInt16, shift: Bool, altGr: Bool, capsLock: Bool = false) -> Character? {
        let entry = entry(code: code, level: level(code: code, shift: shift, altGr: altGr, capsLock: capsLock))
        guard let scalar = Unicode.Scalar(entry & Self.scalarMask), scalar.value != 0 else { return nil }
        return Character(scalar)
    }

    /// Whether `code` with these modifiers is a dead key.
    public func isDeadKey(_ code: UInt16, shift: Bool, altGr: Bool) -> Bool {
        entry(code: code, level: (shift ? 1 : 0) | (altGr ? 2 : 0)) & Self.deadFlag != 0
    }

    /// Whether CapsLock acts on `code` (inverting Shift when AltGr is not held).
    public func capsLockAffects(_ code: UInt16) -> Bool {
        entry(code: code, level: 0) & Self.capsFlag != 0
    }

    func level(code: UInt16, shift: Bool, altGr: Bool, capsLock: Bool) -> Int {
        let invert = capsLock && !altGr && capsLockAffects(code)
        return ((shift != invert) ? 1 : 0) | (altGr ? 2 : 0)
    }

    // MARK: - Reverse mapping (for generators and tests)

    /// The single key press typing `character` without dead keys, preferring fewer modifiers and the
    /// main block over the keypad; nil when the layout needs a dead-key sequence or cannot type it.
    public func keystrokes(for character: Character) -> (code: UInt16, shift: Bool, altGr: Bool)? {
        guard let stroke = findStroke(for: character, dead: false) else { return nil }
        return (stroke.code, stroke.shift, stroke.altGr)
    }

    /// The key presses typing `character`: one press, or a dead key followed by Space when the layout
    /// has the character only as a dead key. Nil when the layout cannot type it.
    public func keystrokeSequence(for character: Character) -> [Keystroke]? {
        if let stroke = findStroke(for: character, dead: false) {
            return [stroke]
        }
        if let stroke = findStroke(for: character, dead: true) {
            return [stroke, Keystroke(code: Evdev.KEY_SPACE)]
        }
        return nil
    }

    /// Every character the layout can type (each once), in table order.
    public var characters: [Character] {
        var seen = Set<Character>()
        var result: [Character] = []
        for entry in table {
            guard let scalar = Unicode.Scalar(entry & Self.scalarMask), scalar.value != 0 else { continue }
            if seen.insert(Character(scalar)).inserted {
                result.append(Character(scalar))
            }
        }
        return result
    }

    private func findStroke(for character: Character, dead: Bool) -> Keystroke? {
        guard character.unicodeScalars.count == 1, let wanted = character.unicodeScalars.first?.value else {
            return nil
        }
        for keypad in [false, true] {
            for level in 0..<4 {
                for code in 0..<Self.codeCount where Self.isKeypad(UInt16(code)) == keypad {
                    let entry = table[code * 4 + level]
                    if entry & Self.scalarMask == wanted, (entry & Self.deadFlag != 0) == dead {
                        return Keystroke(code: UInt16(code), shift: level & 1 != 0, altGr: level & 2 != 0)
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

    // MARK: - Registry

    /// All built-in layouts.
    public static let all: [KeyboardLayout] = [.us, .se, .de, .uk, .fr]

    /// Names accepted by `named(_:)` (aliases `sv` and `gb` are accepted too).
    public static let names: [String] = all.map(\.name)

    /// The layout called `name` (case-insensitive; `sv` = `se`, `gb` = `uk`), or nil.
    public static func named(_ name: String) -> KeyboardLayout? {
        let key = name.lowercased()
        let canonical: String
        switch key {
        case "sv": canonical = "se"
        case "gb": canonical = "uk"
        default: canonical = key
        }
        return all.first { $0.name == canonical }
    }
}
