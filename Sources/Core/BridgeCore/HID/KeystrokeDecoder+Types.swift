extension KeystrokeDecoder {
    /// The key a scanner sends after each barcode.
    public enum Suffix: String, Sendable, Equatable, CaseIterable {
        /// `KEY_ENTER` or `KEY_KPENTER` ends a line; Tab is ignored.
        case enter
        /// `KEY_TAB` ends a line; Enter is ignored.
        case tab
    }

    /// Why a line was thrown away instead of delivered.
    public enum DiscardReason: String, Sendable, Equatable {
        /// The kernel dropped events (`SYN_DROPPED`), so keys may be missing: the line in progress (or,
        /// between lines, the one that follows) is swallowed up to its suffix or an inter-key timeout.
        /// Reported for every drop, even between lines, since input was lost either way.
        case synDropped
        /// The line grew past `maxLineLength` characters.
        case overlong
        /// A line was started and the next key (or the suffix) did not come within `interKeyTimeout`.
        case interKeyTimeout
    }

    /// What the decoder reports.
    public enum Output: Sendable, Equatable {
        /// A complete barcode (suffix excluded). Empty lines (a bare suffix) are not reported.
        case line(String)
        /// A line (or the rest of one) was dropped; reported once per line.
        case discarded(DiscardReason)
    }

    /// Decoder settings.
    public struct Configuration: Sendable, Equatable {
        public var layout: KeyboardLayout
        public var suffix: Suffix
        /// Longest line accepted, in Unicode scalars. Default 4096 (a full QR code is ~4300).
        public var maxLineLength: Int
        /// Longest gap allowed between two key presses of one line, in seconds; nil (or a value that is
        /// not positive and finite) disables it. Scanners type a key every few milliseconds, so the
        /// default 0.5 s is generous.
        public var interKeyTimeout: Double?

        public init(
            layout: KeyboardLayout, suffix: Suffix = .enter, maxLineLength: Int = 4096,
            interKeyTimeout: Double? = 0.5
        ) {
            self.layout = layout
            self.suffix = suffix
            self.maxLineLength = max(1, maxLineLength)
            self.interKeyTimeout = interKeyTimeout
        }
    }
}
