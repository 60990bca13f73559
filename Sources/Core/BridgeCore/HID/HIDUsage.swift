/// HID keyboard-page usages (USB HID Usage Tables, page 0x07) for the evdev key codes the scanner
/// tooling uses, inverted from the kernel's `hid_keyboard[]` map in `hid-input.c`.
///
/// The kernel reports the usage in `MSC_SCAN` as `0x70000 | usage` just before each `EV_KEY`.
public enum HIDUsage {
    /// The `MSC_SCAN` value for `code`, or nil for a code not in the table. On ISO layouts the key left
    /// of Enter (`KEY_BACKSLASH`) is the "non-US #" usage 0x32 rather than the ANSI backslash 0x31.
    public static func scanValue(forKey code: UInt16, iso: Bool = false) -> Int32? {
        if iso && code == Evdev.KEY_BACKSLASH {
            return 0x70032
        }
        guard let usage = usages[code] else { return nil }
        return 0x70000 | Int32(usage)
    }

    /// The `MSC_SCAN` value for `code` as a keyboard with `layout` would send it.
    public static func scanValue(forKey code: UInt16, layout: KeyboardLayout) -> Int32? {
        scanValue(forKey: code, iso: layout.isISO)
    }

    private static let usages: [UInt16: UInt16] = {
        typealias K = Evdev
        var map: [UInt16: UInt16] = [:]
        let letters: [UInt16] = [
            K.KEY_A, K.KEY_B, K.KEY_C, K.KEY_D, K.KEY_E, K.KEY_F, K.KEY_G, K.KEY_H, K.KEY_I, K.KEY_J, K.KEY_K,
            K.KEY_L, K.KEY_M, K.KEY_N, K.KEY_O, K.KEY_P, K.KEY_Q, K.KEY_R, K.KEY_S, K.KEY_T, K.KEY_U, K.KEY_V,
            K.KEY_W, K.KEY_X, K.KEY_Y, K.KEY_Z,
        ]
        for (index, code) in letters.enumerated() {
            map[code] = 0x04 + UInt16(index)
        }
        // KEY_1...KEY_9, KEY_0 are consecutive codes and consecutive usages 0x1E...0x27.
        for code in K.KEY_1...K.KEY_0 {
            map[code] = 0x1E + (code - K.KEY_1)
        }
        let others: [(UInt16, UInt16)] = [
            (K.KEY_ENTER, 0x28), (K.KEY_ESC, 0x29), (K.KEY_BACKSPACE, 0x2A), (K.KEY_TAB, 0x2B),
            (K.KEY_SPACE, 0x2C), (K.KEY_MINUS, 0x2D), (K.KEY_EQUAL, 0x2E), (K.KEY_LEFTBRACE, 0x2F),
            (K.KEY_RIGHTBRACE, 0x30), (K.KEY_BACKSLASH, 0x31), (K.KEY_SEMICOLON, 0x33),
            (K.KEY_APOSTROPHE, 0x34), (K.KEY_GRAVE, 0x35), (K.KEY_COMMA, 0x36), (K.KEY_DOT, 0x37),
            (K.KEY_SLASH, 0x38), (K.KEY_CAPSLOCK, 0x39),
            (K.KEY_F1, 0x3A), (K.KEY_F2, 0x3B), (K.KEY_F3, 0x3C), (K.KEY_F4, 0x3D), (K.KEY_F5, 0x3E),
            (K.KEY_F6, 0x3F), (K.KEY_F7, 0x40), (K.KEY_F8, 0x41), (K.KEY_F9, 0x42), (K.KEY_F10, 0x43),
            (K.KEY_F11, 0x44), (K.KEY_F12, 0x45), (K.KEY_SYSRQ, 0x46), (K.KEY_SCROLLLOCK, 0x47),
            (K.KEY_INSERT, 0x49), (K.KEY_HOME, 0x4A), (K.KEY_PAGEUP, 0x4B), (K.KEY_DELETE, 0x4C),
            (K.KEY_END, 0x4D), (K.KEY_PAGEDOWN, 0x4E), (K.KEY_RIGHT, 0x4F), (K.KEY_LEFT, 0x50),
            (K.KEY_DOWN, 0x51), (K.KEY_UP, 0x52), (K.KEY_NUMLOCK, 0x53), (K.KEY_KPSLASH, 0x54),
            (K.KEY_KPASTERISK, 0x55), (K.KEY_KPMINUS, 0x56), (K.KEY_KPPLUS, 0x57), (K.KEY_KPENTER, 0x58),
            (K.KEY_KP1, 0x59), (K.KEY_KP2, 0x5A), (K.KEY_KP3, 0x5B), (K.KEY_KP4, 0x5C), (K.KEY_KP5, 0x5D),
            (K.KEY_KP6, 0x5E), (K.KEY_KP7, 0x5F), (K.KEY_KP8, 0x60), (K.KEY_KP9, 0x61), (K.KEY_KP0, 0x62),
            (K.KEY_KPDOT, 0x63), (K.KEY_102ND, 0x64),
            (K.KEY_LEFTCTRL, 0xE0), (K.KEY_LEFTSHIFT, 0xE1), (K.KEY_LEFTALT, 0xE2), (K.KEY_LEFTMETA, 0xE3),
            (K.KEY_RIGHTCTRL, 0xE4), (K.KEY_RIGHTSHIFT, 0xE5), (K.KEY_RIGHTALT, 0xE6), (K.KEY_RIGHTMETA, 0xE7),
        ]
        for (code, usage) in others {
            map[code] = usage
        }
        return map
    }()
}
