/// Finding a keyboard-wedge scanner's keyboard country from what it types (issue 26).
///
/// The scanner reads the calibration code and types its text the way its keyboard country says; `explains` decodes
/// the keystrokes with one layout's table, exactly as the reader loop would, and compares the result with the text.
/// Keystrokes are compared, not characters: a layout explains a scan only if each of its keys, with its Shift and
/// AltGr and dead keys, gives the character the code holds, so layouts that differ only on AltGr or in their dead
/// keys are told apart. Several layouts can explain one scan when they agree on every key the text uses (`fi` and
/// `se` type ASCII alike); the caller names them all.
public enum LayoutCalibration {
    /// The calibration code's text: a marker, then every printable ASCII character (U+0020 to U+007E) once, so
    /// every key a barcode's text can need is pressed, with and without Shift and AltGr, and every dead key of the
    /// layouts that have them (`^`, `` ` ``, `~`, `'`, `"`).
    public static let text: String = "PLCAL " + String((0x21...0x7E).map { Character(Unicode.Scalar(UInt8($0))) })

    /// What one layout makes of the scan: the decoded line, and the positions where it differs from `expected`.
    public struct Reading: Sendable, Equatable {
        public var layout: String
        public var decoded: String?
        /// The characters of `expected` the decoded line does not reproduce, each once, in order.
        public var unmatched: [Character]

        public var explains: Bool { unmatched.isEmpty && decoded != nil }
    }

    /// Decodes `events` (one scan, up to its Enter) with `layout` and compares the line with `expected`.
    public static func read(_ events: [InputEvent], layout: KeyboardLayout, expected: String = text) -> Reading {
        var decoder = KeystrokeDecoder(layout: layout, suffix: .enter, interKeyTimeout: nil)
        let line = decoder.decode(events).compactMap { output -> String? in
            if case .line(let text) = output { return text }
            return nil
        }.first
        return Reading(layout: layout.name, decoded: line, unmatched: mismatches(line ?? "", expected: expected))
    }

    /// The characters of `expected` that `decoded` gets wrong, position by position (a dropped or extra character
    /// shifts the rest: then every later one counts, which is what a wrong layout looks like).
    static func mismatches(_ decoded: String, expected: String) -> [Character] {
        var wrong: [Character] = []
        let got = Array(decoded)
        for (index, character) in expected.enumerated() where index >= got.count || got[index] != character {
            if !wrong.contains(character) { wrong.append(character) }
        }
        if got.count > expected.count, wrong.isEmpty { wrong.append(got[expected.count]) }
        return wrong
    }

    /// The verdict over every reading: the layouts that explain the scan (the preferred first: a plain layout before
    /// a variant, then the shorter name), or, when none does, the reading that came closest.
    public struct Verdict: Sendable, Equatable {
        public var layout: String?
        public var candidates: [String]
        /// When no layout explains the scan: the closest layout and the characters it could not produce.
        public var closest: Reading?
    }

    /// Keyboard countries in the order scanners' manuals list them (a Zebra or Honeywell "country keyboard type"
    /// list starts with these): among layouts that type the code alike, the one a bench most likely set.
    public static let commonLayouts = [
        "us", "gb", "de", "fr", "it", "es", "pt", "nl", "be", "ch", "se", "no", "dk", "fi", "pl", "cz", "sk", "hu",
        "tr", "br", "latam", "ca", "ie", "at", "jp", "ru",
    ]
    /// Variants in the same spirit: a scanner's "no dead keys" or "international" setting.
    static let commonVariants = ["nodeadkeys", "intl", "extd", "fr", "de", "winkeys"]

    /// Orders candidates: a common plain layout first (in `commonLayouts` order), then other plain layouts, then
    /// variants of a common layout (common variants first), then the rest, each group by name.
    static func preference(_ name: String) -> (Int, Int, Int, String) {
        var base = Substring(name)
        var variant: Substring = ""
        if let open = name.firstIndex(of: "(") {
            base = name[..<open]
            variant = name[name.index(after: open)...].dropLast()
        }
        let common = commonLayouts.firstIndex(of: String(base)) ?? commonLayouts.count
        let commonVariant = commonVariants.firstIndex(of: String(variant)) ?? commonVariants.count
        return (variant.isEmpty ? 0 : 1, common, variant.isEmpty ? 0 : commonVariant, name)
    }

    public static func verdict(_ readings: [Reading]) -> Verdict {
        let explaining = readings.filter(\.explains).map(\.layout).sorted { preference($0) < preference($1) }
        if let first = explaining.first { return Verdict(layout: first, candidates: explaining, closest: nil) }
        let closest = readings.filter { $0.decoded != nil }.min { a, b in
            a.unmatched.count != b.unmatched.count ? a.unmatched.count < b.unmatched.count : a.layout < b.layout
        }
        return Verdict(layout: nil, candidates: [], closest: closest)
    }
}
