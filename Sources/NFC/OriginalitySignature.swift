import BridgeCore
import CCryptoShim

/// NXP's originality signature of an NTAG21x (NXP AN11350): 32 bytes the tag returns to READ_SIG, an ECDSA
/// signature on secp128r1 (r || s) over its 7-byte UID, unhashed, by NXP's key. A clone cannot make one for its
/// own UID; a signature copied from a genuine tag holds only for that tag's UID.
public enum OriginalitySignature {
    /// NXP's public key for NTAG21x, as AN11350 publishes it (uncompressed point).
    public static let ntag21xPublicKey: [UInt8] = [
        0x04, 0x49, 0x4E, 0x1A, 0x38, 0x6D, 0x3D, 0x3C, 0xFE, 0x3D, 0xC1,
        0x0E, 0x5D, 0xE6, 0x8A, 0x49, 0x9B, 0x1C, 0x20, 0x2D, 0xB5, 0xB1,
        0x32, 0x39, 0x3E, 0x89, 0xED, 0x19, 0xFE, 0x5B, 0xE8, 0xBC, 0x61,
    ]

    /// True when `signature` is NXP's signature of `uid`; false for anything else (a wrong length included).
    public static func verify(uid: [UInt8], signature: [UInt8]) -> Bool {
        guard uid.count == 7, signature.count == 32 else { return false }
        return ntag21xPublicKey.withUnsafeBufferPointer { key in
            uid.withUnsafeBufferPointer { digest in
                signature.withUnsafeBufferPointer { sig in
                    plings_ecdsa_verify_raw(
                        "secp128r1", key.baseAddress, key.count, digest.baseAddress, digest.count, sig.baseAddress,
                        sig.count) == 1
                }
            }
        }
    }

    /// The verdict for a read: `.genuine` or `.notGenuine` when the tag gave a signature, `.unknown` when it gave
    /// none (a reader without a pass-through, a tag that is not an NTAG21x, a tag lifted too soon).
    public static func check(uid: [UInt8]?, signature: [UInt8]?) -> Originality {
        guard let uid, let signature else { return .unknown }
        return verify(uid: uid, signature: signature) ? .genuine : .notGenuine
    }
}
