import Testing

@testable import Serial

/// The framer against the control characters of ASCII (ISO 646 / ECMA-6): CR 0x0D, LF 0x0A, STX 0x02, ETX 0x03,
/// HT 0x09, GS 0x1D (the GS1 field separator, which must survive byte for byte).
struct SerialFramerTests {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let stx: UInt8 = 0x02
    static let etx: UInt8 = 0x03
    static let tab: UInt8 = 0x09
    static let gs: UInt8 = 0x1D

    /// Everything the framer emits for `chunks` fed at `times` (default: all at 0), then a tick at `end`.
    static func frame(
        _ chunks: [[UInt8]], suffix: SerialFramer.Suffix, prefix: UInt8? = nil, maxLength: Int = 4096,
        timeout: Double = 0.2, times: [Double]? = nil, end: Double? = nil
    ) -> [SerialFramer.Output] {
        var framer = SerialFramer(suffix: suffix, prefix: prefix, maxLength: maxLength, interByteTimeout: timeout)
        var out: [SerialFramer.Output] = []
        for (index, chunk) in chunks.enumerated() {
            framer.feed(chunk, now: times?[index] ?? 0) { out.append($0) }
        }
        if let end, let last = framer.tick(now: end) { out.append(last) }
        return out
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func crEndsACodeAndEverySplitGivesTheSameCodes() {
        let stream =
            Self.bytes("https://s.plings.io/?t=q&i=A&p=1") + [Self.cr] + Self.bytes("4006381333931") + [Self.cr]
        let expected: [SerialFramer.Output] = [
            .code(Self.bytes("https://s.plings.io/?t=q&i=A&p=1")), .code(Self.bytes("4006381333931")),
        ]
        for cut in 0...stream.count {
            let chunks = [Array(stream[..<cut]), Array(stream[cut...])]
            #expect(Self.frame(chunks, suffix: .cr) == expected, "cut at \(cut)")
        }
    }

    @Test func aScannerSendingCRLFGivesCleanCodesUnderCrAndLf() {
        let stream = Self.bytes("A1") + [Self.cr, Self.lf] + Self.bytes("B2") + [Self.cr, Self.lf]
        let expected: [SerialFramer.Output] = [.code(Self.bytes("A1")), .code(Self.bytes("B2"))]
        #expect(Self.frame([stream], suffix: .cr) == expected)
        #expect(Self.frame([stream], suffix: .lf) == expected)
        #expect(Self.frame([stream], suffix: .crlf) == expected)
        // The LF of a CR LF split over two reads.
        #expect(
            Self.frame([Self.bytes("A1") + [Self.cr], [Self.lf] + Self.bytes("B2") + [Self.cr]], suffix: .cr)
                == expected)
    }

    @Test func controlBytesInsideACodeAreKept() {
        let code = Self.bytes("]C1") + Self.bytes("0104012345678901") + [Self.gs] + Self.bytes("10ABC")
        #expect(Self.frame([code + [Self.cr]], suffix: .cr) == [.code(code)])
        // A CR inside a code under `lf` is data unless an LF follows it.
        let withCR = Self.bytes("X") + [Self.cr] + Self.bytes("Y")
        #expect(Self.frame([withCR + [Self.lf]], suffix: .lf) == [.code(withCR)])
    }

    @Test func stxPrefixAndEtxSuffixFrameACodeAndNoiseOutsideIsReported() {
        let stream = Self.bytes("zz") + [Self.stx] + Self.bytes("A") + [Self.gs] + Self.bytes("B") + [Self.etx]
        #expect(
            Self.frame([stream], suffix: .etx, prefix: Self.stx)
                == [.discarded(.outsideFrame(bytes: 2)), .code([0x41, Self.gs, 0x42])])
        // A second STX before the suffix: the first code lost its end, and is not glued to the next.
        let restart = [Self.stx] + Self.bytes("AB") + [Self.stx] + Self.bytes("CD") + [Self.etx]
        #expect(
            Self.frame([restart], suffix: .etx, prefix: Self.stx)
                == [.discarded(.unfinished(bytes: 2)), .code(Self.bytes("CD"))])
    }

    @Test func tabEndsACode() {
        #expect(
            Self.frame([Self.bytes("A") + [Self.tab] + Self.bytes("B") + [Self.tab]], suffix: .tab) == [
                .code(Self.bytes("A")), .code(Self.bytes("B")),
            ])
    }

    @Test func withoutASuffixAGapEndsTheCode() {
        // Bytes at 0 and 0.1 s: one code; it ends 0.2 s after the last byte, not before.
        let chunks = [Self.bytes("ABC"), Self.bytes("DEF")]
        #expect(Self.frame(chunks, suffix: .none, times: [0, 0.1], end: 0.25) == [])
        #expect(Self.frame(chunks, suffix: .none, times: [0, 0.1], end: 0.31) == [.code(Self.bytes("ABCDEF"))])
        // A gap longer than the timeout between two reads makes two codes.
        #expect(
            Self.frame(chunks, suffix: .none, times: [0, 0.5], end: 1) == [
                .code(Self.bytes("ABC")), .code(Self.bytes("DEF")),
            ])
    }

    @Test func anUnfinishedCodeIsDiscardedAfterTheTimeout() {
        var framer = SerialFramer(suffix: .cr, maxLength: 100, interByteTimeout: 0.2)
        framer.feed(Self.bytes("half"), now: 1) { _ in Issue.record("nothing yet") }
        #expect(framer.pendingDeadline() == 1.2)
        #expect(framer.tick(now: 1.1) == nil)
        #expect(framer.tick(now: 1.2) == .discarded(.unfinished(bytes: 4)))
        #expect(framer.pendingDeadline() == nil)
    }

    @Test func anOverlongCodeIsDiscardedWithItsRestAndTheNextOneIsRead() {
        let stream = Self.bytes("ABCDEFG") + [Self.cr] + Self.bytes("XY") + [Self.cr]
        #expect(
            Self.frame([stream], suffix: .cr, maxLength: 4) == [
                .discarded(.overlong(limit: 4)), .code(Self.bytes("XY")),
            ])
        // Exactly at the limit is fine.
        #expect(Self.frame([Self.bytes("ABCD") + [Self.cr]], suffix: .cr, maxLength: 4) == [.code(Self.bytes("ABCD"))])
    }

    @Test func emptyCodesAreNotCodes() {
        #expect(Self.frame([[Self.cr, Self.cr, Self.lf, Self.cr]], suffix: .cr) == [])
    }
}
