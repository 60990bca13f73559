#!/usr/bin/env python3
"""Golden keystrokes for keyboard layouts, generated from xkb-data through libxkbcommon (ctypes).

This is the outside authority for the HID decoder tests: it never looks at plings-bridge's tables. For each
layout given as NAME or NAME(VARIANT) it types, on a fresh xkb_state per key press, every key of the main
block at the plain, Shift, AltGr and Shift+AltGr levels and reports the character xkb gives (the per-event
way: xkb_state_update_key + xkb_state_key_get_utf8), dead keys excluded; then the dead keys followed by
Space, by base letters and by a key they do not combine with, as the system compose table
(en_US.UTF-8, libx11-data) composes them; then letters under Caps Lock; then Ctrl chords.

Output: one JSON object per layout on stdout:
  {"layout": "de(nodeadkeys)", "chars": [[[codes...], "text"], ...], "dead": [...], "caps": [...],
   "control": [...]}
where each [codes...] lists evdev key codes pressed in order (modifiers first) and released in reverse.
"""
import ctypes
import json
import os
import sys

lib = ctypes.CDLL("libxkbcommon.so.0")


class RuleNames(ctypes.Structure):
    _fields_ = [(n, ctypes.c_char_p) for n in ("rules", "model", "layout", "variant", "options")]


lib.xkb_context_new.restype = ctypes.c_void_p
lib.xkb_context_new.argtypes = [ctypes.c_int]
lib.xkb_keymap_new_from_names.restype = ctypes.c_void_p
lib.xkb_keymap_new_from_names.argtypes = [ctypes.c_void_p, ctypes.POINTER(RuleNames), ctypes.c_int]
lib.xkb_state_new.restype = ctypes.c_void_p
lib.xkb_state_new.argtypes = [ctypes.c_void_p]
lib.xkb_state_unref.argtypes = [ctypes.c_void_p]
lib.xkb_state_update_key.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]
lib.xkb_state_key_get_one_sym.restype = ctypes.c_uint32
lib.xkb_state_key_get_one_sym.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
lib.xkb_state_key_get_utf8.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
lib.xkb_keysym_get_name.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
lib.xkb_compose_table_new_from_buffer.restype = ctypes.c_void_p
lib.xkb_compose_table_new_from_buffer.argtypes = [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
lib.xkb_compose_state_new.restype = ctypes.c_void_p
lib.xkb_compose_state_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.xkb_compose_state_unref.argtypes = [ctypes.c_void_p]
lib.xkb_compose_state_feed.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
lib.xkb_compose_state_get_status.argtypes = [ctypes.c_void_p]
lib.xkb_compose_state_get_utf8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]

DOWN, UP = 1, 0
COMPOSING, COMPOSED = 1, 2
# evdev codes (linux/input-event-codes.h)
LEFTCTRL, LEFTSHIFT, RIGHTALT, CAPSLOCK, SPACE = 29, 42, 100, 58, 57
MODIFIERS = {29, 42, 54, 56, 97, 100, 125, 126, 58, 69, 70}
# The main block: digit row to slash, the ISO key (86), and space. Keypad, F-keys and the rest are left out.
MAIN_BLOCK = [c for c in list(range(2, 14)) + list(range(16, 28)) + list(range(30, 42)) + list(range(43, 54))
              + [SPACE, 86] if c not in MODIFIERS]

context = lib.xkb_context_new(2)  # XKB_CONTEXT_NO_ENVIRONMENT_NAMES
locale_dir = os.environ.get("XLOCALEDIR", "/usr/share/X11/locale")
with open(os.path.join(locale_dir, "en_US.UTF-8", "Compose"), "rb") as f:
    compose_text = f.read()
compose_table = lib.xkb_compose_table_new_from_buffer(
    context, compose_text, len(compose_text), b"en_US.UTF-8", 1, 0)
if not compose_table:
    sys.exit("cannot load the en_US.UTF-8 compose table")


def keysym_name(sym):
    buf = ctypes.create_string_buffer(64)
    lib.xkb_keysym_get_name(sym, buf, 64)
    return buf.value.decode()


def press(keymap, codes, locked=()):
    """(keysym, utf8) of the last code in `codes` pressed with the ones before it held, on a fresh state
    with the keys in `locked` pressed and released first (Caps Lock)."""
    state = lib.xkb_state_new(keymap)
    try:
        for code in locked:
            lib.xkb_state_update_key(state, code + 8, DOWN)
            lib.xkb_state_update_key(state, code + 8, UP)
        for code in codes[:-1]:
            lib.xkb_state_update_key(state, code + 8, DOWN)
        key = codes[-1] + 8
        buf = ctypes.create_string_buffer(64)
        lib.xkb_state_key_get_utf8(state, key, buf, 64)
        return lib.xkb_state_key_get_one_sym(state, key), buf.value.decode()
    finally:
        lib.xkb_state_unref(state)


def compose(keysyms):
    """What the compose table makes of `keysyms`: text when composed, None when cancelled or incomplete."""
    state = lib.xkb_compose_state_new(compose_table, 0)
    try:
        for sym in keysyms:
            lib.xkb_compose_state_feed(state, sym)
        if lib.xkb_compose_state_get_status(state) != COMPOSED:
            return None
        buf = ctypes.create_string_buffer(64)
        lib.xkb_compose_state_get_utf8(state, buf, 64)
        return buf.value.decode()
    finally:
        lib.xkb_compose_state_unref(state)


def printable(text):
    return len(text) == 1 and ord(text) >= 0x20 and not (0x7F <= ord(text) <= 0x9F)


def golden(spec):
    layout, _, variant = spec.partition("(")
    names = RuleNames(b"evdev", b"pc105", layout.encode(), variant.rstrip(")").encode(), None)
    keymap = lib.xkb_keymap_new_from_names(context, ctypes.byref(names), 0)
    if not keymap:
        sys.exit(f"xkb cannot compile {spec}")
    has_altgr = keysym_name(press(keymap, [RIGHTALT])[0]) == "ISO_Level3_Shift"
    levels = [[], [LEFTSHIFT]] + ([[RIGHTALT], [RIGHTALT, LEFTSHIFT]] if has_altgr else [])
    chars, dead, seen, by_char = [], [], set(), {}
    for mods in levels:
        for code in MAIN_BLOCK:
            sym, text = press(keymap, mods + [code])
            if keysym_name(sym).startswith("dead_"):
                dead.append((mods + [code], sym))
            elif printable(text) and text not in seen:
                seen.add(text)
                by_char[text] = (mods + [code], sym)
                chars.append([mods + [code], text])
    dead_cases = []
    seen_dead = set()
    for strokes, sym in dead:
        if sym in seen_dead:
            continue
        seen_dead.add(sym)
        spacing = next((t for t in (compose([sym, sym]), compose([sym, by_char[" "][1]])) if t and len(t) == 1), "")
        followers = [c for c in " aeiouAEIOUnNcCyYszZ" if c in by_char]
        cancelling = next((c for c in "1234567890qQ" if c in by_char and compose([sym, by_char[c][1]]) is None), None)
        if cancelling:
            followers.append(cancelling)
        for follower in followers:
            follower_strokes, follower_sym = by_char[follower]
            text = compose([sym, follower_sym])
            dead_cases.append([[strokes, follower_strokes], text if text is not None else spacing + follower])
    caps = []
    for code in MAIN_BLOCK:
        sym, text = press(keymap, [code], locked=[CAPSLOCK])
        if printable(text) and not keysym_name(sym).startswith("dead_"):
            caps.append([[CAPSLOCK, code], text])
    control = []
    for wanted in "]jmA":
        if wanted in by_char:
            strokes = by_char[wanted][0]
            _, text = press(keymap, [LEFTCTRL] + strokes)
            if len(text) == 1 and ord(text) < 0x20:
                control.append([[LEFTCTRL] + strokes, text])
    return {"layout": spec, "chars": chars, "dead": dead_cases, "caps": caps, "control": control}


if __name__ == "__main__":
    for spec in sys.argv[1:]:
        print(json.dumps(golden(spec), ensure_ascii=True))
