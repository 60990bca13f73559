import BridgeCore
import CXKBCommon
import Foundation
import Platform

/// Keyboard layouts compiled from xkb-data through libxkbcommon, and the system compose table.
///
/// Each layout is compiled once per process (`rules evdev`, model `pc105`, no options) and turned into the plain
/// keycode x modifier-state table `KeyboardLayout` holds: for every key and every combination of Shift, AltGr
/// (LevelThree), Control, Caps Lock and Num Lock, the key's level comes from xkb's key types
/// (`xkb_state_key_get_level`), its keysym from `xkb_keymap_key_get_syms_by_level`, and its character from
/// `xkb_state_key_get_utf32` (which applies xkb's Caps Lock capitalization and Control transformation). The
/// compose sequences starting with the layout's dead keys are read the same way from the compose table, so the
/// decoder never calls into libxkbcommon per key.
public enum XKBLayouts {
    /// A layout name or variant that xkb-data does not have, or an xkb-data that cannot be read.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let message: String
        /// Whether the variant is at fault (the layout itself exists).
        public var isVariant = false
        public var description: String { message }
    }

    /// Checks `layout`/`variant` against xkb-data's catalog without compiling (cheap enough for every
    /// configuration load); returns the canonical name (`gb`, `de(nodeadkeys)`).
    @discardableResult
    public static func validate(layout: String, variant: String?) throws(Failure) -> String {
        let (name, variantName) = try names(layout: layout, variant: variant)
        let catalog = catalog
        guard !catalog.layouts.isEmpty else {
            throw Failure(message: "xkb-data is not installed (\(xkbRoot)/rules/evdev.lst is missing)")
        }
        guard catalog.layouts[name] != nil else {
            throw Failure(message: unknownMessage(name: name, variant: variantName))
        }
        guard variantName.isEmpty || catalog.variants[name]?[variantName] != nil else {
            throw Failure(message: unknownMessage(name: name, variant: variantName), isVariant: true)
        }
        return variantName.isEmpty ? name : "\(name)(\(variantName))"
    }

    /// Names accepted for the layouts the hand-written tables used to call otherwise.
    static let aliases = ["uk": "gb", "sv": "se"]

    /// Where xkb-data lives (libxkbcommon's default include path) and the compose table used.
    static let xkbRoot = "/usr/share/X11/xkb"
    static let composeLocale = "en_US.UTF-8"
    static var composePath: String {
        (ProcessInfo.processInfo.environment["XLOCALEDIR"] ?? "/usr/share/X11/locale") + "/\(composeLocale)/Compose"
    }

    /// Splits `layout` (`de`, `de(nodeadkeys)`, `uk`) and `variant` into xkb's layout and variant names.
    public static func names(layout: String, variant: String?) throws(Failure) -> (layout: String, variant: String) {
        var name = layout.trimmingCharacters(in: .whitespaces).lowercased()
        var inner = ""
        if let open = name.firstIndex(of: "("), name.hasSuffix(")") {
            inner = String(name[name.index(after: open)..<name.index(before: name.endIndex)])
            name = String(name[..<open])
        }
        let separate = (variant ?? "").trimmingCharacters(in: .whitespaces).lowercased()
        if !inner.isEmpty && !separate.isEmpty && inner != separate {
            throw Failure(message: "layout '\(layout)' names variant '\(inner)' but the variant is '\(separate)'")
        }
        let valid = { (text: String) in
            text.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 || $0 == 45 }
        }
        let chosen = inner.isEmpty ? separate : inner
        guard !name.isEmpty, valid(name), valid(chosen) else {
            throw Failure(message: "'\(layout)' is not a layout name like 'de' or 'de(nodeadkeys)'")
        }
        return (aliases[name] ?? name, chosen)
    }

    /// The layout called `layout` (optionally with `variant`), compiled once and then cached.
    public static func layout(_ layout: String, variant: String? = nil) throws(Failure) -> KeyboardLayout {
        let (name, variantName) = try names(layout: layout, variant: variant)
        let key = variantName.isEmpty ? name : "\(name)(\(variantName))"
        if let cached = cache.withLock({ $0[key] }) { return cached }
        let compiled: KeyboardLayout
        do {
            compiled = try compile(name: name, variant: variantName, canonical: key)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(message: "\(error)")
        }
        cache.withLock { $0[key] = compiled }
        return compiled
    }

    private static let cache = Mutex<[String: KeyboardLayout]>([:])

    // MARK: - Names xkb-data knows

    /// The layouts and variants in xkb-data's `rules/evdev.lst`, with their descriptions.
    public struct Catalog: Sendable {
        public var layouts: [String: String] = [:]
        /// layout -> variant -> description.
        public var variants: [String: [String: String]] = [:]
    }

    /// xkb-data's catalog, read once.
    public static let catalog: Catalog = {
        var catalog = Catalog()
        guard let text = try? String(contentsOfFile: xkbRoot + "/rules/evdev.lst", encoding: .utf8) else {
            return catalog
        }
        var section = ""
        for line in text.split(separator: "\n") {
            if line.hasPrefix("! ") {
                section = String(line.dropFirst(2))
                continue
            }
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2 else { continue }
            let name = String(parts[0])
            let rest = parts[1].trimmingCharacters(in: .whitespaces)
            if section == "layout" {
                catalog.layouts[name] = rest
            } else if section == "variant", let colon = rest.firstIndex(of: ":") {
                let layout = String(rest[..<colon])
                catalog.variants[layout, default: [:]][name] = rest[rest.index(after: colon)...]
                    .trimmingCharacters(in: .whitespaces)
            }
        }
        return catalog
    }()

    /// Up to eight of `candidates` closest to `name` (edit distance, then prefix), for error messages.
    public static func closeNames(to name: String, in candidates: some Sequence<String>) -> [String] {
        let limit = max(2, name.count / 2)
        var ranked: [(name: String, distance: Int)] = []
        for candidate in candidates {
            let distance = editDistance(name, candidate)
            if distance <= limit || candidate.hasPrefix(name) || name.hasPrefix(candidate) {
                ranked.append((candidate, distance))
            }
        }
        ranked.sort { $0.distance != $1.distance ? $0.distance < $1.distance : $0.name < $1.name }
        return ranked.prefix(8).map { $0.name }
    }

    private static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let saved = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = saved
            }
        }
        return row[b.count]
    }

    /// Why `name(variant)` does not compile, in words a configuration error can carry.
    static func unknownMessage(name: String, variant: String) -> String {
        let catalog = catalog
        if catalog.layouts[name] == nil {
            let close = closeNames(to: name, in: catalog.layouts.keys)
            return "unknown keyboard layout '\(name)'"
                + (close.isEmpty
                    ? " (see /usr/share/X11/xkb/rules/evdev.lst)"
                    : "; close names: "
                        + close.joined(separator: ", "))
        }
        let variants = catalog.variants[name] ?? [:]
        let close = closeNames(to: variant, in: variants.keys)
        let shown = close.isEmpty ? variants.keys.sorted().prefix(8).map { $0 } : close
        return "layout '\(name)' has no variant '\(variant)'"
            + (shown.isEmpty ? " (it has no variants)" : "; close names: " + shown.joined(separator: ", "))
    }

    // MARK: - Compiling

    private static func compile(name: String, variant: String, canonical: String) throws -> KeyboardLayout {
        guard let context = xkb_context_new(XKB_CONTEXT_NO_ENVIRONMENT_NAMES) else {
            throw Failure(message: "libxkbcommon: cannot create a context")
        }
        defer { xkb_context_unref(context) }
        // Errors go into our own message; libxkbcommon would print its own to stderr.
        xkb_context_set_log_level(context, XKB_LOG_LEVEL_CRITICAL)
        let keymap = "evdev".withCString { rules in
            "pc105".withCString { model in
                name.withCString { layout in
                    variant.withCString { variantName in
                        var names = xkb_rule_names(
                            rules: rules, model: model, layout: layout, variant: variantName, options: nil)
                        return xkb_keymap_new_from_names(context, &names, XKB_KEYMAP_COMPILE_NO_FLAGS)
                    }
                }
            }
        }
        guard let keymap else {
            if !FileManager.default.fileExists(atPath: xkbRoot + "/symbols") {
                throw Failure(message: "xkb-data is not installed (\(xkbRoot)/symbols is missing)")
            }
            throw Failure(message: unknownMessage(name: name, variant: variant))
        }
        defer { xkb_keymap_unref(keymap) }
        let compose = loadComposeTable(context)
        defer { if let compose { xkb_compose_table_unref(compose) } }
        var builder = TableBuilder(keymap: keymap, compose: compose)
        try builder.build()
        let catalog = catalog
        let display =
            variant.isEmpty
            ? catalog.layouts[name] ?? name : catalog.variants[name]?[variant] ?? "\(name) (\(variant))"
        return KeyboardLayout(
            name: canonical, displayName: display, table: builder.table, modifierRoles: builder.roles,
            compose: builder.composeTable(), isISO: name != "us")
    }

    /// The system compose table (nil when libx11-data is missing: dead keys then type their spacing forms).
    private static func loadComposeTable(_ context: OpaquePointer) -> OpaquePointer? {
        guard let file = fopen(composePath, "r") else { return nil }
        defer { fclose(file) }
        return xkb_compose_table_new_from_file(
            context, file, composeLocale, XKB_COMPOSE_FORMAT_TEXT_V1, XKB_COMPOSE_COMPILE_NO_FLAGS)
    }
}

/// Builds one layout's table from a compiled keymap (used once per layout, on the compiling thread).
private struct TableBuilder {
    typealias State = KeyboardLayout.State
    typealias Role = KeyboardLayout.Role

    let keymap: OpaquePointer
    let compose: OpaquePointer?
    var table = [UInt32](repeating: 0, count: KeyboardLayout.codeCount * KeyboardLayout.stateCount)
    var roles = [UInt8](repeating: 0, count: KeyboardLayout.modifierKeys.count)
    /// Dead keysyms by id - 1, and the keysym a scalar was first typed with (the compose followers).
    var deadKeysyms: [xkb_keysym_t] = []
    var followers: [(symbol: UInt32, keysym: xkb_keysym_t)] = []

    init(keymap: OpaquePointer, compose: OpaquePointer?) {
        self.keymap = keymap
        self.compose = compose
    }

    private func mask(_ name: String) -> UInt32 {
        let index = xkb_keymap_mod_get_index(keymap, name)
        return index == XKB_MOD_INVALID ? 0 : 1 << index
    }

    /// The modifiers `code` sets while held (depressed) and after a press and release (locked).
    private func modifiers(of code: UInt16) -> (depressed: UInt32, locked: UInt32) {
        guard let state = xkb_state_new(keymap) else { return (0, 0) }
        defer { xkb_state_unref(state) }
        let keycode = UInt32(code) + 8
        xkb_state_update_key(state, keycode, XKB_KEY_DOWN)
        let depressed = xkb_state_serialize_mods(state, XKB_STATE_MODS_DEPRESSED)
        xkb_state_update_key(state, keycode, XKB_KEY_UP)
        return (depressed, xkb_state_serialize_mods(state, XKB_STATE_MODS_LOCKED))
    }

    mutating func build() throws {
        let shift = mask("Shift")
        let control = mask("Control")
        let alt = mask("Mod1")
        let meta = mask("Mod4")
        // LevelThree is whatever the key typing ISO_Level3_Shift sets (Mod5 in xkb-data's pc symbols).
        var level3: UInt32 = 0
        for keycode in UInt32(8)..<UInt32(256) where level3 == 0 {
            var syms: UnsafePointer<xkb_keysym_t>?
            let count = xkb_keymap_key_get_syms_by_level(keymap, keycode, 0, 0, &syms)
            if count == 1, let syms, syms[0] == UInt32(XKB_KEY_ISO_Level3_Shift) {
                level3 = modifiers(of: UInt16(keycode - 8)).depressed
            }
        }
        let capsLock = modifiers(of: Evdev.KEY_CAPSLOCK).locked
        let numLock = modifiers(of: Evdev.KEY_NUMLOCK).locked
        for (index, code) in KeyboardLayout.modifierKeys.enumerated() {
            let set = modifiers(of: code).depressed
            var role: UInt8 = 0
            if set & shift != 0 { role |= Role.shift }
            if set & control != 0 { role |= Role.control }
            if level3 != 0 && set & level3 != 0 {
                role |= Role.level3
            } else if set & alt != 0 {
                role |= Role.alt
            }
            if set & meta != 0 { role |= Role.meta }
            roles[index] = role
        }
        guard let state = xkb_state_new(keymap) else { throw XKBLayouts.Failure(message: "libxkbcommon: no state") }
        defer { xkb_state_unref(state) }
        // Control states last: they keep a control character only where the same state without Control
        // types a printable one.
        let states = (0..<UInt8(KeyboardLayout.stateCount)).sorted { ($0 & State.control) < ($1 & State.control) }
        for bits in states {
            var depressed: UInt32 = 0
            if bits & State.shift != 0 { depressed |= shift }
            if bits & State.level3 != 0 { depressed |= level3 }
            if bits & State.control != 0 { depressed |= control }
            var locked: UInt32 = 0
            if bits & State.capsLock != 0 { locked |= capsLock }
            if bits & State.numLock != 0 { locked |= numLock }
            xkb_state_update_mask(state, depressed, 0, locked, 0, 0, 0)
            for code in 1..<KeyboardLayout.codeCount {
                table[code * KeyboardLayout.stateCount + Int(bits)] = entry(state, code: code, bits: bits)
            }
        }
    }

    private mutating func entry(_ state: OpaquePointer, code: Int, bits: UInt8) -> UInt32 {
        let keycode = UInt32(code + 8)
        let layoutIndex = xkb_state_key_get_layout(state, keycode)
        guard layoutIndex != XKB_LAYOUT_INVALID else { return 0 }
        let level = xkb_state_key_get_level(state, keycode, layoutIndex)
        var syms: UnsafePointer<xkb_keysym_t>?
        let count = xkb_keymap_key_get_syms_by_level(keymap, keycode, layoutIndex, level, &syms)
        guard count == 1, let keysym = syms?[0] else { return 0 }
        let isControlState = bits & State.control != 0
        if Self.isDead(keysym) {
            return isControlState ? 0 : KeyboardLayout.deadFlag | deadID(keysym)
        }
        let scalar = xkb_state_key_get_utf32(state, keycode)
        let isControlCharacter = scalar < 0x20 || (0x7F...0x9F).contains(scalar)
        if isControlState {
            // Ctrl+key: only the control characters xkb's Control transformation makes of printable keys.
            let plain = table[code * KeyboardLayout.stateCount + Int(bits & ~State.control)]
            let plainIsPrintable = plain != 0 && plain & KeyboardLayout.deadFlag == 0
            return plainIsPrintable && isControlCharacter && scalar != 0 ? scalar : 0
        }
        // Return, Tab, BackSpace, Escape, Delete have "characters" too, but a scanner's line is made of text.
        guard !isControlCharacter, Unicode.Scalar(scalar) != nil else { return 0 }
        if !followers.contains(where: { $0.symbol == scalar }) {
            followers.append((scalar, keysym))
        }
        return scalar
    }

    static func isDead(_ keysym: xkb_keysym_t) -> Bool {
        var buffer = [CChar](repeating: 0, count: 64)
        guard xkb_keysym_get_name(keysym, &buffer, buffer.count) > 0 else { return false }
        return cString(buffer).hasPrefix("dead_")
    }

    private mutating func deadID(_ keysym: xkb_keysym_t) -> UInt32 {
        if let index = deadKeysyms.firstIndex(of: keysym) { return UInt32(index + 1) }
        deadKeysyms.append(keysym)
        return UInt32(deadKeysyms.count)
    }

    // MARK: - Compose

    /// Feeds `sequence` to a fresh compose state: the text when it completes, .node when it is a prefix.
    private func feed(_ sequence: [xkb_keysym_t]) -> ComposeOutcome {
        guard let compose, let state = xkb_compose_state_new(compose, XKB_COMPOSE_STATE_NO_FLAGS) else {
            return .cancelled
        }
        defer { xkb_compose_state_unref(state) }
        for keysym in sequence {
            _ = xkb_compose_state_feed(state, keysym)
        }
        switch xkb_compose_state_get_status(state) {
        case XKB_COMPOSE_COMPOSED:
            var buffer = [CChar](repeating: 0, count: 64)
            let length = xkb_compose_state_get_utf8(state, &buffer, buffer.count)
            guard length > 0 else { return .cancelled }
            return .text(cString(buffer).unicodeScalars.map(\.value))
        case XKB_COMPOSE_COMPOSING:
            return .composing
        default:
            return .cancelled
        }
    }

    private enum ComposeOutcome {
        case text([UInt32])
        case composing
        case cancelled
    }

    /// The dead keys' compose steps, up to two dead keys deep, and their spacing forms.
    func composeTable() -> ComposeTable {
        guard !deadKeysyms.isEmpty else { return .empty }
        var steps: [UInt64: ComposeTable.Step] = [:]
        var spacing: [[UInt32]] = [[]]
        for dead in deadKeysyms {
            spacing.append(spacingForm(dead))
        }
        let allFollowers =
            followers.map { ($0.symbol, $0.keysym) }
            + deadKeysyms.enumerated().map { (ComposeTable.deadSymbol | UInt32($0.offset + 1), $0.element) }
        var nextNode = UInt32(deadKeysyms.count + 1)
        for (index, dead) in deadKeysyms.enumerated() {
            let node = UInt32(index + 1)
            for (symbol, keysym) in allFollowers {
                switch feed([dead, keysym]) {
                case .text(let text):
                    steps[ComposeTable.key(node: node, symbol: symbol)] = .text(text)
                case .composing where symbol & ComposeTable.deadSymbol != 0:
                    let deeper = nextNode
                    nextNode += 1
                    steps[ComposeTable.key(node: node, symbol: symbol)] = .node(deeper)
                    for (last, lastKeysym) in allFollowers {
                        if case .text(let text) = feed([dead, keysym, lastKeysym]) {
                            steps[ComposeTable.key(node: deeper, symbol: last)] = .text(text)
                        }
                    }
                default:
                    break
                }
            }
        }
        return ComposeTable(spacing: spacing, steps: steps)
    }

    /// What a dead key types on its own: the compose table's dead+dead (`´` for dead_acute), else dead+space,
    /// else the keysym its name drops `dead_` from.
    private func spacingForm(_ dead: xkb_keysym_t) -> [UInt32] {
        for sequence in [[dead, dead], [dead, xkb_keysym_t(XKB_KEY_space)]] {
            if case .text(let text) = feed(sequence), text.count == 1 { return text }
        }
        var buffer = [CChar](repeating: 0, count: 64)
        guard xkb_keysym_get_name(dead, &buffer, buffer.count) > 0 else { return [] }
        let bare = String(cString(buffer).dropFirst("dead_".count))
        for candidate in [bare, "ascii" + bare] {
            let keysym = xkb_keysym_from_name(candidate, XKB_KEYSYM_NO_FLAGS)
            let scalar = xkb_keysym_to_utf32(keysym)
            if keysym != 0, scalar >= 0x20 { return [scalar] }
        }
        return []
    }
}

/// The text of a NUL-terminated C buffer.
private func cString(_ buffer: [CChar]) -> String {
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}
