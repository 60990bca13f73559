import Foundation

/// Combines a pending dead-key accent with the next character, as Windows does.
///
/// Dead + Space gives the accent itself (the way scanners type a literal `^` on dead-key layouts).
/// Dead + a character the accent composes with gives the precomposed letter (`^` + `a` = `â`).
/// Anything else gives the accent followed by the character: nothing typed is lost.
enum DeadKeyComposer {
    /// The combining mark for a dead key's spacing accent, or nil if it is not an accent we know.
    static func combiningMark(for accent: UInt32) -> UInt32? {
        switch accent {
        case 0x5E: return 0x302  // ^ circumflex
        case 0xB4: return 0x301  // ´ acute
        case 0x60: return 0x300  // ` grave
        case 0x7E: return 0x303  // ~ tilde
        case 0xA8: return 0x308  // ¨ diaeresis
        default: return nil
        }
    }

    /// The scalars to append for `accent` (a pending dead key) followed by `next`.
    static func compose(accent: UInt32, next: UInt32) -> (UInt32, UInt32?) {
        if next == 0x20 {
            return (accent, nil)
        }
        if let mark = combiningMark(for: accent), let composed = precomposed(base: next, mark: mark) {
            return (composed, nil)
        }
        return (accent, next)
    }

    /// NFC of base + mark when that is a single scalar (rare path: only after a dead key).
    private static func precomposed(base: UInt32, mark: UInt32) -> UInt32? {
        guard let baseScalar = Unicode.Scalar(base), let markScalar = Unicode.Scalar(mark) else { return nil }
        var view = String.UnicodeScalarView()
        view.append(baseScalar)
        view.append(markScalar)
        let scalars = String(view).precomposedStringWithCanonicalMapping.unicodeScalars
        guard scalars.count == 1, let only = scalars.first else { return nil }
        return only.value
    }
}
