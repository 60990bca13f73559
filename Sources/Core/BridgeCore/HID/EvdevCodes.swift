/// Numbers from Linux `input-event-codes.h` that the HID scanner path needs.
///
/// Spelled exactly as in the kernel header so they can be grepped against it. Defined here rather than
/// imported from Glibc because the values are stable kernel ABI, the pure core stays free of C imports,
/// and the C macros import as `Int32` while `input_event` fields are `UInt16`.
public enum Evdev {
    // Event types.
    public static let EV_SYN: UInt16 = 0x00
    public static let EV_KEY: UInt16 = 0x01
    public static let EV_MSC: UInt16 = 0x04
    public static let EV_LED: UInt16 = 0x11
    public static let EV_REP: UInt16 = 0x14

    // EV_SYN codes.
    public static let SYN_REPORT: UInt16 = 0
    public static let SYN_CONFIG: UInt16 = 1
    public static let SYN_MT_REPORT: UInt16 = 2
    public static let SYN_DROPPED: UInt16 = 3

    // EV_MSC codes.
    public static let MSC_SCAN: UInt16 = 0x04

    // EV_LED codes.
    public static let LED_NUML: UInt16 = 0x00
    public static let LED_CAPSL: UInt16 = 0x01

    /// `KEY_CNT`: key codes are below this; `EVIOCGKEY` returns a bitmap of `KEY_CNT / 8` = 96 bytes.
    public static let KEY_CNT: UInt16 = 0x300

    // Key codes (EV_KEY).
    public static let KEY_ESC: UInt16 = 1
    public static let KEY_1: UInt16 = 2
    public static let KEY_2: UInt16 = 3
    public static let KEY_3: UInt16 = 4
    public static let KEY_4: UInt16 = 5
    public static let KEY_5: UInt16 = 6
    public static let KEY_6: UInt16 = 7
    public static let KEY_7: UInt16 = 8
    public static let KEY_8: UInt16 = 9
    public static let KEY_9: UInt16 = 10
    public static let KEY_0: UInt16 = 11
    public static let KEY_MINUS: UInt16 = 12
    public static let KEY_EQUAL: UInt16 = 13
    public static let KEY_BACKSPACE: UInt16 = 14
    public static let KEY_TAB: UInt16 = 15
    public static let KEY_Q: UInt16 = 16
    public static let KEY_W: UInt16 = 17
    public static let KEY_E: UInt16 = 18
    public static let KEY_R: UInt16 = 19
    public static let KEY_T: UInt16 = 20
    public static let KEY_Y: UInt16 = 21
    public static let KEY_U: UInt16 = 22
    public static let KEY_I: UInt16 = 23
    public static let KEY_O: UInt16 = 24
    public static let KEY_P: UInt16 = 25
    public static let KEY_LEFTBRACE: UInt16 = 26
    public static let KEY_RIGHTBRACE: UInt16 = 27
    public static let KEY_ENTER: UInt16 = 28
    public static let KEY_LEFTCTRL: UInt16 = 29
    public static let KEY_A: UInt16 = 30
    public static let KEY_S: UInt16 = 31
    public static let KEY_D: UInt16 = 32
    public static let KEY_F: UInt16 = 33
    public static let KEY_G: UInt16 = 34
    public static let KEY_H: UInt16 = 35
    public static let KEY_J: UInt16 = 36
    public static let KEY_K: UInt16 = 37
    public static let KEY_L: UInt16 = 38
    public static let KEY_SEMICOLON: UInt16 = 39
    public static let KEY_APOSTROPHE: UInt16 = 40
    public static let KEY_GRAVE: UInt16 = 41
    public static let KEY_LEFTSHIFT: UInt16 = 42
    public static let KEY_BACKSLASH: UInt16 = 43
    public static let KEY_Z: UInt16 = 44
    public static let KEY_X: UInt16 = 45
    public static let KEY_C: UInt16 = 46
    public static let KEY_V: UInt16 = 47
    public static let KEY_B: UInt16 = 48
    public static let KEY_N: UInt16 = 49
    public static let KEY_M: UInt16 = 50
    public static let KEY_COMMA: UInt16 = 51
    public static let KEY_DOT: UInt16 = 52
    public static let KEY_SLASH: UInt16 = 53
    public static let KEY_RIGHTSHIFT: UInt16 = 54
    public static let KEY_KPASTERISK: UInt16 = 55
    public static let KEY_LEFTALT: UInt16 = 56
    public static let KEY_SPACE: UInt16 = 57
    public static let KEY_CAPSLOCK: UInt16 = 58
    public static let KEY_F1: UInt16 = 59
    public static let KEY_F2: UInt16 = 60
    public static let KEY_F3: UInt16 = 61
    public static let KEY_F4: UInt16 = 62
    public static let KEY_F5: UInt16 = 63
    public static let KEY_F6: UInt16 = 64
    public static let KEY_F7: UInt16 = 65
    public static let KEY_F8: UInt16 = 66
    public static let KEY_F9: UInt16 = 67
    public static let KEY_F10: UInt16 = 68
    public static let KEY_NUMLOCK: UInt16 = 69
    public static let KEY_SCROLLLOCK: UInt16 = 70
    public static let KEY_KP7: UInt16 = 71
    public static let KEY_KP8: UInt16 = 72
    public static let KEY_KP9: UInt16 = 73
    public static let KEY_KPMINUS: UInt16 = 74
    public static let KEY_KP4: UInt16 = 75
    public static let KEY_KP5: UInt16 = 76
    public static let KEY_KP6: UInt16 = 77
    public static let KEY_KPPLUS: UInt16 = 78
    public static let KEY_KP1: UInt16 = 79
    public static let KEY_KP2: UInt16 = 80
    public static let KEY_KP3: UInt16 = 81
    public static let KEY_KP0: UInt16 = 82
    public static let KEY_KPDOT: UInt16 = 83
    public static let KEY_102ND: UInt16 = 86
    public static let KEY_F11: UInt16 = 87
    public static let KEY_F12: UInt16 = 88
    public static let KEY_KPENTER: UInt16 = 96
    public static let KEY_RIGHTCTRL: UInt16 = 97
    public static let KEY_KPSLASH: UInt16 = 98
    public static let KEY_SYSRQ: UInt16 = 99
    public static let KEY_RIGHTALT: UInt16 = 100
    public static let KEY_HOME: UInt16 = 102
    public static let KEY_UP: UInt16 = 103
    public static let KEY_PAGEUP: UInt16 = 104
    public static let KEY_LEFT: UInt16 = 105
    public static let KEY_RIGHT: UInt16 = 106
    public static let KEY_END: UInt16 = 107
    public static let KEY_DOWN: UInt16 = 108
    public static let KEY_PAGEDOWN: UInt16 = 109
    public static let KEY_INSERT: UInt16 = 110
    public static let KEY_DELETE: UInt16 = 111
    public static let KEY_LEFTMETA: UInt16 = 125
    public static let KEY_RIGHTMETA: UInt16 = 126
}
