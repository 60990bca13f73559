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
        #expect(OriginalitySignature.check(uid: Self.bytes(Self.first.uid), signature: nil) == .unknown)
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
            // One FAST_READ, one READ_SIG (3C 00) through InCommunicateThru.
            #expect(apdus == ["FF00000005D4423A0027", "FF00000004D4423C00"], "\(apdus)")
            // The same signature on another UID: a copy.
            let (copied, _) = try harness.tap(
                "ntag213", uid: OriginalitySignatureTests.second.uid, "-", "\(url) sig=\(first.signature)")
            #expect(copied.read?.genuine == .notGenuine)
            try harness.rig.setReader(0, "plain")
            let (plain, _) = try harness.tap("ntag213", uid: first.uid, "-", "\(url) sig=\(first.signature)")
            #expect(plain.read?.genuine == .unknown)
            #expect(harness.reads.all.map(\.genuine) == [.genuine, .notGenuine, .unknown])
        }
    }
}
