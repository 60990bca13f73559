/// The built-in layout tables. Each key string lists the characters for plain, Shift, AltGr and
/// Shift+AltGr in that order (see `KeyboardLayout.init`). Sources: the Windows layouts of the same
/// name, cross-checked against `/usr/share/X11/xkb/symbols/{us,se,de,gb,fr}`.
extension KeyboardLayout {
    private typealias K = Evdev

    /// Makes (code, "xX") entries for a row of letter keys.
    private static func letters(_ codes: [UInt16], _ chars: String) -> [(UInt16, String)] {
        precondition(codes.count == chars.count, "letter row length mismatch")
        return zip(codes, chars).map { code, char in (code, String(char) + char.uppercased()) }
    }

    private static let qwertyTop: [UInt16] = [
        K.KEY_Q, K.KEY_W, K.KEY_E, K.KEY_R, K.KEY_T, K.KEY_Y, K.KEY_U,
        K.KEY_I, K.KEY_O, K.KEY_P,
    ]
    private static let qwertyHome: [UInt16] = [
        K.KEY_A, K.KEY_S, K.KEY_D, K.KEY_F, K.KEY_G, K.KEY_H, K.KEY_J,
        K.KEY_K, K.KEY_L, K.KEY_SEMICOLON,
    ]
    private static let qwertyBottom: [UInt16] = [K.KEY_Z, K.KEY_X, K.KEY_C, K.KEY_V, K.KEY_B, K.KEY_N, K.KEY_M]
    private static let digitRow: [UInt16] = [
        K.KEY_1, K.KEY_2, K.KEY_3, K.KEY_4, K.KEY_5, K.KEY_6, K.KEY_7,
        K.KEY_8, K.KEY_9, K.KEY_0,
    ]

    /// Keypad keys and Space, shared by every layout; `decimal` is what KPDOT types.
    private static func common(decimal: Character) -> [(UInt16, String)] {
        let keypad: [(UInt16, Character)] = [
            (K.KEY_KP0, "0"), (K.KEY_KP1, "1"), (K.KEY_KP2, "2"), (K.KEY_KP3, "3"), (K.KEY_KP4, "4"),
            (K.KEY_KP5, "5"), (K.KEY_KP6, "6"), (K.KEY_KP7, "7"), (K.KEY_KP8, "8"), (K.KEY_KP9, "9"),
            (K.KEY_KPDOT, decimal), (K.KEY_KPSLASH, "/"), (K.KEY_KPASTERISK, "*"), (K.KEY_KPMINUS, "-"),
            (K.KEY_KPPLUS, "+"), (K.KEY_SPACE, " "),
        ]
        return keypad.map { code, char in (code, String(repeating: char, count: 4)) }
    }

    /// US English (ANSI, no ISO key).
    public static let us = KeyboardLayout(
        name: "us", displayName: "English (US)", isISO: false,
        keys: common(decimal: ".")
            + letters(qwertyTop, "qwertyuiop") + letters(Array(qwertyHome.prefix(9)), "asdfghjkl")
            + letters(qwertyBottom, "zxcvbnm")
            + [
                (K.KEY_GRAVE, "`~"), (K.KEY_1, "1!"), (K.KEY_2, "2@"), (K.KEY_3, "3#"), (K.KEY_4, "4$"),
                (K.KEY_5, "5%"), (K.KEY_6, "6^"), (K.KEY_7, "7&"), (K.KEY_8, "8*"), (K.KEY_9, "9("),
                (K.KEY_0, "0)"), (K.KEY_MINUS, "-_"), (K.KEY_EQUAL, "=+"), (K.KEY_LEFTBRACE, "[{"),
                (K.KEY_RIGHTBRACE, "]}"), (K.KEY_BACKSLASH, "\\|"), (K.KEY_SEMICOLON, ";:"),
                (K.KEY_APOSTROPHE, "'\""), (K.KEY_COMMA, ",<"), (K.KEY_DOT, ".>"), (K.KEY_SLASH, "/?"),
            ])

    /// Swedish. AltGr: @ £ $ € { [ ] } \ | ~ (dead); ´ ` ¨ ^ ~ are dead keys.
    public static let se = KeyboardLayout(
        name: "se", displayName: "Swedish", isISO: true,
        keys: common(decimal: ",")
            + letters(qwertyTop, "qwertyuiop") + letters(qwertyHome, "asdfghjklö")
            + letters(qwertyBottom, "zxcvbnm")
            + [
                (K.KEY_GRAVE, "§½"), (K.KEY_1, "1!"), (K.KEY_2, "2\"@"), (K.KEY_3, "3#£"), (K.KEY_4, "4¤$"),
                (K.KEY_5, "5%€"), (K.KEY_6, "6&"), (K.KEY_7, "7/{"), (K.KEY_8, "8(["), (K.KEY_9, "9)]"),
                (K.KEY_0, "0=}"), (K.KEY_MINUS, "+?\\"), (K.KEY_EQUAL, "´`"), (K.KEY_E, "eE€"),
                (K.KEY_M, "mMµ"), (K.KEY_LEFTBRACE, "åÅ"), (K.KEY_RIGHTBRACE, "¨^~"), (K.KEY_APOSTROPHE, "äÄ"),
                (K.KEY_BACKSLASH, "'*"), (K.KEY_102ND, "<>|"), (K.KEY_COMMA, ",;"), (K.KEY_DOT, ".:"),
                (K.KEY_SLASH, "-_"),
            ],
        dead: [
            (K.KEY_EQUAL, 0), (K.KEY_EQUAL, 1), (K.KEY_RIGHTBRACE, 0), (K.KEY_RIGHTBRACE, 1),
            (K.KEY_RIGHTBRACE, 2),
        ])

    /// German (QWERTZ). AltGr: @ € { [ ] } \ ~ | ² ³ µ; ^ ´ ` are dead keys.
    public static let de = KeyboardLayout(
        name: "de", displayName: "German", isISO: true,
        keys: common(decimal: ",")
            + letters(qwertyTop, "qwertzuiop") + letters(qwertyHome, "asdfghjklö")
            + letters(qwertyBottom, "yxcvbnm")
            + [
                (K.KEY_GRAVE, "^°"), (K.KEY_1, "1!"), (K.KEY_2, "2\"²"), (K.KEY_3, "3§³"), (K.KEY_4, "4$"),
                (K.KEY_5, "5%"), (K.KEY_6, "6&"), (K.KEY_7, "7/{"), (K.KEY_8, "8(["), (K.KEY_9, "9)]"),
                (K.KEY_0, "0=}"), (K.KEY_MINUS, "ß?\\"), (K.KEY_EQUAL, "´`"), (K.KEY_Q, "qQ@"),
                (K.KEY_E, "eE€"), (K.KEY_M, "mMµ"), (K.KEY_LEFTBRACE, "üÜ"), (K.KEY_RIGHTBRACE, "+*~"),
                (K.KEY_APOSTROPHE, "äÄ"), (K.KEY_BACKSLASH, "#'"), (K.KEY_102ND, "<>|"), (K.KEY_COMMA, ",;"),
                (K.KEY_DOT, ".:"), (K.KEY_SLASH, "-_"),
            ],
        dead: [(K.KEY_GRAVE, 0), (K.KEY_EQUAL, 0), (K.KEY_EQUAL, 1)])

    /// UK English. Shift-2 `"`, Shift-3 `£`, `#~` left of Enter (KEY_BACKSLASH), `\|` on KEY_102ND,
    /// AltGr+4 `€`, AltGr+` `|`, AltGr+vowel acute vowels. No dead keys.
    public static let uk = KeyboardLayout(
        name: "uk", displayName: "English (UK)", isISO: true,
        keys: common(decimal: ".")
            + letters(qwertyTop, "qwertyuiop") + letters(Array(qwertyHome.prefix(9)), "asdfghjkl")
            + letters(qwertyBottom, "zxcvbnm")
            + [
                (K.KEY_GRAVE, "`¬|"), (K.KEY_1, "1!"), (K.KEY_2, "2\""), (K.KEY_3, "3£"), (K.KEY_4, "4$€"),
                (K.KEY_5, "5%"), (K.KEY_6, "6^"), (K.KEY_7, "7&"), (K.KEY_8, "8*"), (K.KEY_9, "9("),
                (K.KEY_0, "0)"), (K.KEY_MINUS, "-_"), (K.KEY_EQUAL, "=+"), (K.KEY_A, "aAáÁ"), (K.KEY_E, "eEéÉ"),
                (K.KEY_I, "iIíÍ"), (K.KEY_O, "oOóÓ"), (K.KEY_U, "uUúÚ"), (K.KEY_LEFTBRACE, "[{"),
                (K.KEY_RIGHTBRACE, "]}"), (K.KEY_SEMICOLON, ";:"), (K.KEY_APOSTROPHE, "'@"),
                (K.KEY_BACKSLASH, "#~"), (K.KEY_102ND, "\\|"), (K.KEY_COMMA, ",<"), (K.KEY_DOT, ".>"),
                (K.KEY_SLASH, "/?"),
            ])

    /// French (AZERTY). Digits need Shift (or CapsLock); AltGr: ~ (dead) # { [ | ` (dead) \ ^ @ ] } €;
    /// ^ and ¨ are dead keys.
    public static let fr = KeyboardLayout(
        name: "fr", displayName: "French", isISO: true,
        keys: common(decimal: ".")
            + letters(qwertyTop, "azertyuiop") + letters(qwertyHome, "qsdfghjklm")
            + letters(Array(qwertyBottom.prefix(6)), "wxcvbn")
            + [
                (K.KEY_GRAVE, "²"), (K.KEY_1, "&1"), (K.KEY_2, "é2~"), (K.KEY_3, "\"3#"), (K.KEY_4, "'4{"),
                (K.KEY_5, "(5["), (K.KEY_6, "-6|"), (K.KEY_7, "è7`"), (K.KEY_8, "_8\\"), (K.KEY_9, "ç9^"),
                (K.KEY_0, "à0@"), (K.KEY_MINUS, ")°]"), (K.KEY_EQUAL, "=+}"), (K.KEY_E, "eE€"),
                (K.KEY_LEFTBRACE, "^¨"), (K.KEY_RIGHTBRACE, "$£¤"), (K.KEY_APOSTROPHE, "ù%"),
                (K.KEY_BACKSLASH, "*µ"), (K.KEY_102ND, "<>"), (K.KEY_M, ",?"), (K.KEY_COMMA, ";."),
                (K.KEY_DOT, ":/"), (K.KEY_SLASH, "!§"),
            ],
        dead: [(K.KEY_2, 2), (K.KEY_7, 2), (K.KEY_LEFTBRACE, 0), (K.KEY_LEFTBRACE, 1)],
        capsLockKeys: digitRow)
}
