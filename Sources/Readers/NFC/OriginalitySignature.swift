import BridgeCore
import CCryptoShim

/// NXP's originality signature of an NTAG21x or a MIFARE Ultralight EV1: 32 bytes the tag returns to READ_SIG, an
/// ECDSA signature on secp128r1 (r || s) over its 7-byte UID, unhashed, by the key NXP keeps for that product. A
/// clone cannot make one for its own UID; a signature copied from a genuine tag holds only for that tag's UID.
/// Which key applies is what the tag's GET_VERSION answer says it is (`NXPProduct`).
public enum OriginalitySignature {
    /// NXP's public key for NTAG21x, as AN11350 publishes it (uncompressed point).
    public static let ntag21xPublicKey: [UInt8] = [
        0x04, 0x49, 0x4E, 0x1A, 0x38, 0x6D, 0x3D, 0x3C, 0xFE, 0x3D, 0xC1,
        0x0E, 0x5D, 0xE6, 0x8A, 0x49, 0x9B, 0x1C, 0x20, 0x2D, 0xB5, 0xB1,
        0x32, 0x39, 0x3E, 0x89, 0xED, 0x19, 0xFE, 0x5B, 0xE8, 0xBC, 0x61,
    ]

    /// NXP's public key for MIFARE Ultralight EV1, as NXP publishes it for MF0ULx1 (uncompressed point).
    public static let ultralightEV1PublicKey: [UInt8] = [
        0x04, 0x90, 0x93, 0x3B, 0xDC, 0xD6, 0xE9, 0x9B, 0x4E, 0x25, 0x5E,
        0x3D, 0xA5, 0x53, 0x89, 0xA8, 0x27, 0x56, 0x4E, 0x11, 0x71, 0x8E,
        0x01, 0x72, 0x92, 0xFA, 0xF2, 0x32, 0x26, 0xA9, 0x66, 0x14, 0xB8,
    ]

    /// The public key of a product's signatures.
    public static func publicKey(_ key: NXPProduct.SignatureKey) -> [UInt8] {
        switch key {
        case .ntag21x: return ntag21xPublicKey
        case .ultralightEV1: return ultralightEV1PublicKey
        }
    }

    /// True when `signature` is NXP's signature of `uid` under `key` (NTAG21x's by default); false for anything
    /// else (a wrong length included).
    public static func verify(uid: [UInt8], signature: [UInt8], key: NXPProduct.SignatureKey = .ntag21x) -> Bool {
        guard uid.count == 7, signature.count == 32 else { return false }
        return publicKey(key).withUnsafeBufferPointer { key in
            uid.withUnsafeBufferPointer { digest in
                signature.withUnsafeBufferPointer { sig in
                    plings_ecdsa_verify_raw(
                        "secp128r1", key.baseAddress, key.count, digest.baseAddress, digest.count, sig.baseAddress,
                        sig.count) == 1
                }
            }
        }
    }

    /// The verdict for a read. `.genuine` or `.notGenuine` only when the tag named its product (GET_VERSION), NXP's
    /// key for that product is known, and it gave a signature. `.unknown` otherwise: no signature (a reader without
    /// a pass-through, a tag lifted too soon), no product (no answer to GET_VERSION), or a product whose key is not
    /// known here. Never `.notGenuine` on a guess: a gate acting on it would turn a genuine tag away.
    public static func check(uid: [UInt8]?, signature: [UInt8]?, product: NXPProduct?) -> Originality {
        guard let uid, let signature, let key = product?.signatureKey else { return .unknown }
        return verify(uid: uid, signature: signature, key: key) ? .genuine : .notGenuine
    }
}
