/// The fields of a PC/SC part 3 storage-card ATR (PC/SC Part 3 Supplemental Document).
///
/// A PC/SC reader that talks to a contactless memory card (MIFARE Ultralight/NTAG, Classic, ISO 15693,
/// FeliCa, ...) synthesises an ATR whose historical bytes are
/// `80 4F 0C | A0 00 00 03 06 | SS | NN NN | 00 00 00 00`: a TLV (tag 4F, length 12) holding the PC/SC
/// RID, the standard byte SS and the card name NN NN. The full ATR is usually
/// `3B 8F 80 01 80 4F 0C A0 00 00 03 06 SS NN NN 00 00 00 00 TCK`.
public struct StorageCardATR: Sendable, Equatable, Hashable {
    /// The standard byte SS (0x03 ISO 14443 A part 3, 0x07 ISO 14443 B part 3, 0x0B ISO 15693 part 3,
    /// 0x11 FeliCa, ...).
    public var standard: UInt8
    /// The card name NN NN (0x0001 MIFARE Classic 1K, 0x0003 MIFARE Ultralight, ...).
    public var cardName: UInt16

    /// Creates the fields directly.
    public init(standard: UInt8, cardName: UInt16) {
        self.standard = standard
        self.cardName = cardName
    }

    /// The byte string that marks a storage-card ATR: historical TLV 80 4F 0C and the PC/SC RID.
    public static let marker: [UInt8] = [0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06]

    /// Where the marker starts in `atr`, if anywhere.
    ///
    /// The marker is searched for rather than expected at offset 4 so that a reader which encodes the
    /// interface bytes differently (other T0/TDi) is still recognised.
    public static func markerOffset(in atr: [UInt8]) -> Int? {
        guard atr.count >= marker.count else { return nil }
        for start in 0...(atr.count - marker.count) where atr[start..<(start + marker.count)].elementsEqual(marker) {
            return start
        }
        return nil
    }

    /// Parses SS and NN NN from a storage-card ATR; nil when `atr` has no marker or is cut short after it.
    public static func parse(_ atr: [UInt8]) -> StorageCardATR? {
        guard let start = markerOffset(in: atr) else { return nil }
        let fields = start + marker.count
        guard atr.count >= fields + 3 else { return nil }
        return StorageCardATR(standard: atr[fields], cardName: UInt16(atr[fields + 1]) << 8 | UInt16(atr[fields + 2]))
    }

    /// The card name from the PC/SC part 3 supplemental table, if the code is listed.
    public var cardNameText: String? {
        Self.cardNames[cardName]
    }

    /// A short name for the standard byte, if it is one this code knows.
    public var standardText: String? {
        switch standard {
        case 0x03: return "ISO 14443 A part 3"
        case 0x07: return "ISO 14443 B part 3"
        case 0x0B: return "ISO 15693 part 3"
        case 0x11: return "FeliCa"
        default: return nil
        }
    }

    /// PC/SC Part 3 Supplemental Document card names (NN NN), as published (0x0005 is not assigned).
    public static let cardNames: [UInt16: String] = [
        0x0000: "No information given",
        0x0001: "MIFARE Classic 1K",
        0x0002: "MIFARE Classic 4K",
        0x0003: "MIFARE Ultralight",
        0x0004: "SLE55R_XXXX",
        0x0006: "SR176",
        0x0007: "SRI X4K",
        0x0008: "AT88RF020",
        0x0009: "AT88SC0204CRF",
        0x000A: "AT88SC0808CRF",
        0x000B: "AT88SC1616CRF",
        0x000C: "AT88SC3216CRF",
        0x000D: "AT88SC6416CRF",
        0x000E: "SRF55V10P",
        0x000F: "SRF55V02P",
        0x0010: "SRF55V10S",
        0x0011: "SRF55V02S",
        0x0012: "TAG_IT",
        0x0013: "LRI512",
        0x0014: "ICODESLI",
        0x0015: "TEMPSENS",
        0x0016: "I.CODE1",
        0x0017: "PicoPass 2K",
        0x0018: "PicoPass 2KS",
        0x0019: "PicoPass 16K",
        0x001A: "PicoPass 16KS",
        0x001B: "PicoPass 16K (8x2)",
        0x001C: "PicoPass 16KS (8x2)",
        0x001D: "PicoPass 32KS (16+16)",
        0x001E: "PicoPass 32KS (16+8x2)",
        0x001F: "PicoPass 32KS (8x2+16)",
        0x0020: "PicoPass 32KS (8x2+8x2)",
        0x0021: "LRI64",
        0x0022: "I.CODE UID",
        0x0023: "I.CODE EPC",
        0x0024: "LRI12",
        0x0025: "LRI128",
        0x0026: "MIFARE Mini",
        0x0027: "my-d move (SLE 66R01P)",
        0x0028: "my-d NFC (SLE 66RxxP)",
        0x0029: "my-d proximity 2 (SLE 66RxxS)",
        0x002A: "my-d proximity enhanced (SLE 55RxxE)",
        0x002B: "my-d light (SRF 55V01P)",
        0x002C: "PJM Stack Tag (SRF 66V10ST)",
        0x002D: "PJM Item Tag (SRF 66V10IT)",
        0x002E: "PJM Light (SRF 66V01ST)",
        0x002F: "Jewel Tag",
        0x0030: "Topaz NFC Tag",
        0x0031: "AT88SC0104CRF",
        0x0032: "AT88SC0404CRF",
        0x0033: "AT88RF01C",
        0x0034: "AT88RF04C",
        0x0035: "i-Code SL2",
        0x0036: "MIFARE Plus SL1 2K",
        0x0037: "MIFARE Plus SL1 4K",
        0x0038: "MIFARE Plus SL2 2K",
        0x0039: "MIFARE Plus SL2 4K",
        0x003A: "MIFARE Ultralight C",
        0x003B: "FeliCa",
        0x003C: "Melexis Sensor Tag (MLX90129)",
        0x003D: "MIFARE Ultralight EV1",
    ]
}
