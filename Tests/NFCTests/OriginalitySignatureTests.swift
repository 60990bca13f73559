import BridgeCore
import BridgeTestSupport
import Foundation
import NFC
import Testing

/// NXP's originality signature of NTAG21x (NXP AN11350: ECDSA on secp128r1 over the 7-byte UID, unhashed, NXP's
/// published key). The pairs are two NTAG21x tags' UIDs and the signatures they gave to READ_SIG, as published
/// with the Proxmark3 project's public-key recovery tool; each was checked here with a plain implementation of
/// SEC 2's secp128r1 before being written down. A signature over another UID must not verify.
struct OriginalitySignatureTests {
    static let first = (
        uid: "04E10CDA993C80", signature: "8B76052EE42F5567BEB53238B3E3F9950707C0DCC956B5C5EFCFDB709B2D82B3"
    )
    static let second = (
        uid: "04DB0BDA993C80", signature: "6048EFD9417CD10F6B7F1818D471A7FE5B46868D2EABDC6307A1E0AAE139D8D0"
    )
    /// A MIFARE Ultralight EV1's UID and READ_SIG answer, published with the same tool's self-tests; it verifies
    /// under the key NXP publishes for the Ultralight EV1, not under NTAG21x's.
    static let ultralightEV1 = (
        uid: "04C1285A373080", signature: "CEA2EB0B3C95D0844A95B824A7553703B3702378033BF0987899DB70151A19E7"
    )
    /// GET_VERSION answers from NXP's data sheets (NTAG213/215/216: "GET_VERSION response"; MF0ULx1 the same).
    static let ntag213Version: [UInt8] = [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03]
    static let mf0ul21Version: [UInt8] = [0x00, 0x04, 0x03, 0x01, 0x01, 0x00, 0x0E, 0x03]
    static let ntagI2C1kVersion: [UInt8] = [0x00, 0x04, 0x04, 0x05, 0x02, 0x01, 0x13, 0x03]

    static func bytes(_ hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).map {
            let start = hex.index(hex.startIndex, offsetBy: $0)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
        }
    }

    @Test func genuineTagsVerify() {
        for pair in [Self.first, Self.second] {
            #expect(OriginalitySignature.verify(uid: Self.bytes(pair.uid), signature: Self.bytes(pair.signature)))
        }
    }

    @Test func aSignatureOverAnotherUIDOrAChangedByteDoesNot() {
        #expect(
            !OriginalitySignature.verify(uid: Self.bytes(Self.second.uid), signature: Self.bytes(Self.first.signature)))
        var flipped = Self.bytes(Self.first.signature)
        flipped[31] ^= 0x01
        #expect(!OriginalitySignature.verify(uid: Self.bytes(Self.first.uid), signature: flipped))
        #expect(
            !OriginalitySignature.verify(uid: Self.bytes(Self.first.uid), signature: [UInt8](repeating: 0, count: 32)))
        #expect(!OriginalitySignature.verify(uid: Self.bytes(Self.first.uid), signature: [1, 2, 3]))
        let ntag213 = NXPProduct.identify(version: Self.ntag213Version)
        #expect(
            OriginalitySignature.check(uid: Self.bytes(Self.first.uid), signature: nil, product: ntag213) == .unknown)
    }

    @Test func eachProductIsCheckedWithItsOwnKeyAndAnUnknownProductIsNeverCalledAClone() {
        let ev1 = (uid: Self.bytes(Self.ultralightEV1.uid), signature: Self.bytes(Self.ultralightEV1.signature))
        #expect(OriginalitySignature.verify(uid: ev1.uid, signature: ev1.signature, key: .ultralightEV1))
        #expect(!OriginalitySignature.verify(uid: ev1.uid, signature: ev1.signature, key: .ntag21x))
        let ntag = (uid: Self.bytes(Self.first.uid), signature: Self.bytes(Self.first.signature))
        #expect(!OriginalitySignature.verify(uid: ntag.uid, signature: ntag.signature, key: .ultralightEV1))

        let mf0ul21 = NXPProduct.identify(version: Self.mf0ul21Version)
        let ntag213 = NXPProduct.identify(version: Self.ntag213Version)
        // The genuine Ultralight EV1 that was called a clone when every signature was checked with NTAG21x's key.
        #expect(OriginalitySignature.check(uid: ev1.uid, signature: ev1.signature, product: mf0ul21) == .genuine)
        #expect(OriginalitySignature.check(uid: ntag.uid, signature: ntag.signature, product: ntag213) == .genuine)
        // A tag that says it is an NTAG213 but carries an Ultralight EV1's signature: not genuine.
        #expect(OriginalitySignature.check(uid: ev1.uid, signature: ev1.signature, product: ntag213) == .notGenuine)
        // No product (no GET_VERSION answer), or one whose key is not published here: unknown, never a clone.
        #expect(OriginalitySignature.check(uid: ev1.uid, signature: ev1.signature, product: nil) == .unknown)
        let i2c = NXPProduct.identify(version: Self.ntagI2C1kVersion)
        #expect(OriginalitySignature.check(uid: ntag.uid, signature: ntag.signature, product: i2c) == .unknown)
    }
}

extension NFCRigTests {
    /// `nfc.checkOriginality` end to end: READ_SIG through the ACR122U's pass-through after the one FAST_READ, the
    /// verdict on the read; a plain reader (no pass-through) gives no signature, so unknown.
    @Suite struct OriginalityRigTests {
        @Test func theVerdictFollowsTheSignatureTheTagGives() throws {
            let harness = try NFCHarness(configure: {
                $0.checkOriginality = true
                $0.profiles = [.init(reader: "Virtual PCD 00 00", profile: .acr122u)]
            })
            defer { harness.close() }
            try harness.rig.setReader(0, "acr122u")
            let first = OriginalitySignatureTests.first
            let url = "url=\(NDEF.plingsURL)"
            let (genuine, apdus) = try harness.tap("ntag213", uid: first.uid, "-", "\(url) sig=\(first.signature)")
            #expect(genuine.read?.genuine == .genuine, "\(genuine.error ?? "") \(apdus)")
            // One FAST_READ, GET_VERSION (60) and READ_SIG (3C 00) through InCommunicateThru.
            #expect(apdus == ["FF00000005D4423A0027", "FF00000003D44260", "FF00000004D4423C00"], "\(apdus)")
            // The same signature on another UID: a copy.
            let (copied, _) = try harness.tap(
                "ntag213", uid: OriginalitySignatureTests.second.uid, "-", "\(url) sig=\(first.signature)")
            #expect(copied.read?.genuine == .notGenuine)
            try harness.rig.setReader(0, "plain")
            let (plain, _) = try harness.tap("ntag213", uid: first.uid, "-", "\(url) sig=\(first.signature)")
            #expect(plain.read?.genuine == .unknown)
            #expect(harness.reads.all.map(\.genuine) == [.genuine, .notGenuine, .unknown])
        }

        /// A genuine MIFARE Ultralight EV1 is genuine (GET_VERSION names it, and NXP's Ultralight EV1 key verifies
        /// its signature); a tag that does not answer GET_VERSION is unknown, whatever its signature.
        @Test func anUltralightEV1IsCheckedWithItsOwnKey() throws {
            let harness = try NFCHarness(configure: {
                $0.checkOriginality = true
                $0.profiles = [.init(reader: "Virtual PCD 00 00", profile: .acr122u)]
            })
            defer { harness.close() }
            try harness.rig.setReader(0, "acr122u")
            let ev1 = OriginalitySignatureTests.ultralightEV1
            let url = "url=\(NDEF.plingsURL)"
            let (genuine, apdus) = try harness.tap("ul21", uid: ev1.uid, "-", "\(url) sig=\(ev1.signature)")
            #expect(genuine.read?.genuine == .genuine, "\(genuine.error ?? "") \(apdus)")
            #expect(genuine.result?.product?.name == "MIFARE Ultralight EV1 (MF0UL21)")
            let (silent, _) = try harness.tap("ul21", uid: ev1.uid, "-", "\(url) sig=\(ev1.signature) version=none")
            #expect(silent.read?.genuine == .unknown)
            #expect(harness.reads.all.map(\.genuine) == [.genuine, .unknown])
        }
    }
}
