/// What kind of tag is on the reader, decided from its ATR alone, and so how to read it.
public enum TagKind: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// An NFC Forum Type 2 tag (MIFARE Ultralight family, NTAG21x) read with PC/SC `FF B0` page reads.
    case type2(name: String)
    /// An ISO-DEP (ISO 14443-4) card: a Type 4 tag candidate, read through the NDEF application.
    /// Phones and bank cards are ISO-DEP too; they fail the NDEF application SELECT.
    case type4
    /// MIFARE Classic (and MIFARE Mini/Plus in security level 1/2, which emulate it): NDEF through the MAD and
    /// the NFC Forum's public keys (`ClassicTagReader`).
    case mifareClassic(name: String)
    /// An ISO 15693 tag (PC/SC Part 3 standard byte 09-0C): NFC Forum Type 5 (`Type5TagReader`), read on readers
    /// whose profile speaks ISO 15693.
    case type5(name: String)
    /// A storage card we do not read NDEF from (FeliCa, Jewel/Topaz, ...). Read for its UID only.
    case unsupported(name: String)

    /// Card names (PC/SC part 3) of the NXP Type 2 family. NTAG21x reports 0x0003 on ACR122U and most readers.
    static let type2Names: [UInt16: String] = [
        0x0003: "NTAG/Ultralight",
        0x003A: "MIFARE Ultralight C",
        0x003D: "MIFARE Ultralight EV1",
    ]
    /// Card names that are MIFARE Classic or answer as it.
    static let classicNames: Set<UInt16> = [0x0001, 0x0002, 0x0026, 0x0036, 0x0037, 0x0038, 0x0039]
    /// ISO 14443 A part 3 card names that are known not to be Type 2 (Jewel/Topaz are Type 1).
    static let notType2Names: Set<UInt16> = [0x002F, 0x0030]

    /// Classifies a card from its ATR.
    ///
    /// - A PC/SC part 3 storage-card ATR (`StorageCardATR.marker`) is classified by its card name:
    ///   the Ultralight/NTAG names are Type 2, the Classic names Classic. A name that is unknown (or
    ///   "no information", or a known ISO 14443 A part 3 name such as my-d move) with standard byte 0x03
    ///   (ISO 14443 A part 3) is treated as a Type 2 *candidate*: this is safe because the Type 2 read
    ///   starts with pages 3-6, which every Type 2 tag has, and goes no further unless page 3 holds a
    ///   valid capability container (magic 0xE1). ISO 15693 parts 1-4 (standard bytes 09-0C) are Type 5. Every
    ///   other storage card is `unsupported`.
    /// - A storage-card ATR cut short after the marker is `unsupported` (it is not ISO-DEP either).
    /// - Anything else, the empty ATR included, is ISO-DEP: `type4` (the NDEF application is tried).
    public static func from(atr: [UInt8]) -> TagKind {
        guard StorageCardATR.markerOffset(in: atr) != nil else { return .type4 }
        guard let storage = StorageCardATR.parse(atr) else {
            return .unsupported(name: "storage card (truncated PC/SC ATR)")
        }
        let listed = storage.cardNameText
        if let name = type2Names[storage.cardName] {
            return .type2(name: name)
        }
        if classicNames.contains(storage.cardName) {
            return .mifareClassic(name: listed ?? "MIFARE Classic")
        }
        let code = "card name 0x" + NFCHex.word(storage.cardName)
        if (0x09...0x0C).contains(storage.standard) {
            return .type5(name: storage.cardName == 0x0000 ? "ISO 15693 tag" : listed ?? "ISO 15693 tag (\(code))")
        }
        if storage.standard == 0x03 && !notType2Names.contains(storage.cardName) {
            if let listed, storage.cardName != 0x0000 {
                return .type2(name: listed)
            }
            return .type2(name: "ISO 14443 A tag (\(code))")
        }
        let standard = storage.standardText ?? "standard 0x" + NFCHex.byte(storage.standard)
        return .unsupported(name: "\(listed ?? code) (\(standard))")
    }

    /// A stable machine name for JSON output: `type2`, `type4`, `type5`, `mifareClassic` or `unsupported`.
    public var code: String {
        switch self {
        case .type2: return "type2"
        case .type4: return "type4"
        case .type5: return "type5"
        case .mifareClassic: return "mifareClassic"
        case .unsupported: return "unsupported"
        }
    }

    /// The UID as the tag's standard writes it, from the bytes GET UID (`FF CA 00 00`) hands over. A PC/SC reader
    /// passes an ISO 15693 UID on in the order the tag sends it, least significant byte first; ISO/IEC 15693-3 (and
    /// NXP's and ST's tools, and the tags' labels) write it most significant byte first, starting with `E0`, the
    /// allocation class. ISO 14443 UIDs (Type 2, Type 4, MIFARE Classic) come in the order they are written.
    public func uidAsWritten(_ handedOver: [UInt8]) -> [UInt8] {
        if case .type5 = self { return handedOver.reversed() }
        return handedOver
    }

    /// A short human description, e.g. `NTAG/Ultralight (Type 2)` or `ISO-DEP (Type 4)`.
    public var description: String {
        switch self {
        case .type2(let name): return "\(name) (Type 2)"
        case .type4: return "ISO-DEP (Type 4)"
        case .type5(let name): return "\(name) (Type 5)"
        case .mifareClassic(let name): return "\(name) (MIFARE Classic NDEF)"
        case .unsupported(let name): return "\(name) (unsupported)"
        }
    }
}
