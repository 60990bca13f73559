/// The NXP Type 2 product a tag says it is in its answer to GET_VERSION (`60`, 8 bytes: fixed header 00, vendor 04
/// for NXP, product type, subtype, major and minor product version, storage size, protocol type 03), and which of
/// NXP's originality keys signs that product's UIDs.
///
/// Why it is asked: an NTAG21x and a MIFARE Ultralight EV1 look the same to a PC/SC reader (card name `00 03` in the
/// ATR, the same Type 2 layout, and a capability container that on an Ultralight EV1 is whatever its formatter
/// wrote), but NXP signs them with different keys: a genuine Ultralight EV1 checked against the NTAG21x key looked
/// like a clone.
public struct NXPProduct: Sendable, Equatable {
    /// Which published key verifies the product's originality signature.
    public enum SignatureKey: Sendable, Equatable {
        /// NTAG210/212/213/215/216 (NXP AN11350).
        case ntag21x
        /// MIFARE Ultralight EV1 (MF0UL11, MF0UL21 and their H variants).
        case ultralightEV1
    }

    /// The product's name as NXP's data sheet gives it, e.g. `NTAG213` or `MIFARE Ultralight EV1 (MF0UL21)`.
    public let name: String
    /// The key of its signature, or nil when no key for the product is known here (its verdict is `unknown`).
    public let signatureKey: SignatureKey?

    /// The GET_VERSION answers of the products NXP's data sheets list ("GET_VERSION response"), byte for byte.
    static let known: [[UInt8]: NXPProduct] = [
        [0x00, 0x04, 0x04, 0x01, 0x01, 0x00, 0x0B, 0x03]: .init(name: "NTAG210", signatureKey: .ntag21x),
        [0x00, 0x04, 0x04, 0x01, 0x01, 0x00, 0x0E, 0x03]: .init(name: "NTAG212", signatureKey: .ntag21x),
        [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03]: .init(name: "NTAG213", signatureKey: .ntag21x),
        [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x11, 0x03]: .init(name: "NTAG215", signatureKey: .ntag21x),
        [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x13, 0x03]: .init(name: "NTAG216", signatureKey: .ntag21x),
        [0x00, 0x04, 0x03, 0x01, 0x01, 0x00, 0x0B, 0x03]:
            .init(name: "MIFARE Ultralight EV1 (MF0UL11)", signatureKey: .ultralightEV1),
        [0x00, 0x04, 0x03, 0x02, 0x01, 0x00, 0x0B, 0x03]:
            .init(name: "MIFARE Ultralight EV1 (MF0ULH11)", signatureKey: .ultralightEV1),
        [0x00, 0x04, 0x03, 0x01, 0x01, 0x00, 0x0E, 0x03]:
            .init(name: "MIFARE Ultralight EV1 (MF0UL21)", signatureKey: .ultralightEV1),
        [0x00, 0x04, 0x03, 0x02, 0x01, 0x00, 0x0E, 0x03]:
            .init(name: "MIFARE Ultralight EV1 (MF0ULH21)", signatureKey: .ultralightEV1),
        // NTAG I2C and NTAG I2C plus sign with keys not published with their data sheets: named, verdict unknown.
        [0x00, 0x04, 0x04, 0x05, 0x02, 0x01, 0x13, 0x03]: .init(name: "NTAG I2C 1k (NT3H1101)", signatureKey: nil),
        [0x00, 0x04, 0x04, 0x05, 0x02, 0x01, 0x15, 0x03]: .init(name: "NTAG I2C 2k (NT3H1201)", signatureKey: nil),
        [0x00, 0x04, 0x04, 0x05, 0x02, 0x02, 0x13, 0x03]:
            .init(name: "NTAG I2C plus 1k (NT3H2111)", signatureKey: nil),
        [0x00, 0x04, 0x04, 0x05, 0x02, 0x02, 0x15, 0x03]:
            .init(name: "NTAG I2C plus 2k (NT3H2211)", signatureKey: nil),
    ]

    public init(name: String, signatureKey: SignatureKey?) {
        self.name = name
        self.signatureKey = signatureKey
    }

    /// The product a GET_VERSION answer names; one NXP does not list here is named by its bytes, with no key.
    /// Nil when there is no answer or it is not 8 bytes from NXP (vendor 04).
    public static func identify(version: [UInt8]?) -> NXPProduct? {
        guard let version, version.count == 8, version[1] == 0x04 else { return nil }
        if let product = known[version] { return product }
        return NXPProduct(name: "NXP product \(NFCHex.bytes(version, separator: ""))", signatureKey: nil)
    }
}
