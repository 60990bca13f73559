import BridgeCore
import BridgeTestSupport
import Foundation
import NFC
import Testing

/// Reader profiles on the rig's reader personalities: fast read against READ BINARY, fallbacks, feedback after
/// the commit. Expected bytes: ACR122U API manual (FF 00 40 P2 04 T1 T2 N B; FF 00 52 00 00; FF 00 00 00 Lc D4 42),
/// PC/SC Part 3 (FF C2 sessions), NTAG21x datasheet (FAST_READ 3A start end). Serialized with every rig test.
extension NFCRigTests {
    @Suite struct ReaderPersonalityTests {
        let uid = "04A1B2C3D4E5F6"
        static let reader0 = "Virtual PCD 00 00"

        /// Reader 0 gets `profile` by `nfc.profiles`; reader 1 keeps the plain profile (READ BINARY).
        func harness(
            profile: ReaderProfile, personality: String, commit: Bool = false,
            configure: @escaping (inout BridgeConfig.NFC) -> Void = { _ in }
        ) throws -> NFCHarness {
            let harness = try NFCHarness(
                configure: { config in
                    config.profiles = [.init(reader: Self.reader0, profile: profile)]
                    configure(&config)
                }, commit: commit)
            try harness.rig.setReader(0, personality)
            return harness
        }

        /// The tag images of the rig, with the URL each must read as.
        static var images: [(kind: String, data: [UInt8], url: String)] {
            let longURL = NDEF.plingsURL + "&x=" + String(repeating: "a", count: 300)
            let lock: [UInt8] = [0x01, 0x03, 0xA0, 0x10, 0x44]
            let poster = NDEF.smartPoster(
                NDEF.uri(NDEF.plingsURL, first: true, last: false) + NDEF.text("Plings gate", first: false))
            return [
                ("ntag213", NDEF.tlv(NDEF.uri(NDEF.plingsURL)), NDEF.plingsURL),
                ("ntag215", NDEF.tlv(NDEF.uri(NDEF.plingsURL)), NDEF.plingsURL),
                ("ntag216", NDEF.tlv(NDEF.uri(NDEF.plingsURL)), NDEF.plingsURL),
                ("ntag215", NDEF.tlv(NDEF.longURIRecord(longURL)), longURL),
                ("ntag216", NDEF.tlv(NDEF.longURIRecord(longURL)), longURL),
                ("ntag213", lock + NDEF.tlv(NDEF.uri(NDEF.plingsURL)), NDEF.plingsURL),
                ("ntag213", NDEF.tlv(poster), NDEF.plingsURL),
            ]
        }

        @Test(arguments: [("acr122u", ReaderProfile.acr122u), ("part3", ReaderProfile.omnikey)])
        func fastReadGivesTheSameURLAsReadBinaryForEveryImage(personality: String, profile: ReaderProfile) throws {
            let harness = try harness(profile: profile, personality: personality)
            defer { harness.close() }
            for image in Self.images {
                let (fast, fastAPDUs) = try harness.tap(image.kind, uid: uid, NDEF.hex(image.data), reader: 0)
                let (plain, plainAPDUs) = try harness.tap(image.kind, uid: uid, NDEF.hex(image.data), reader: 1)
                #expect(fast.read?.raw == image.url, "\(image.kind) \(personality): \(fast.error ?? "")")
                #expect(plain.read?.raw == image.url, "\(image.kind) plain")
                #expect(fast.result?.fastRead == .used, "\(image.kind): \(String(describing: fast.result?.fastRead))")
                #expect(plain.result?.fastRead == .notTried)
                #expect(fast.profile == profile && plain.profile == .plain)
                #expect(!plainAPDUs.contains { $0.hasPrefix("FF000000") || $0.hasPrefix("FFC2") })
                #expect(fastAPDUs.count < plainAPDUs.count, "\(image.kind): \(fastAPDUs) vs \(plainAPDUs)")
            }
        }

        @Test func acr122uReadsAPlingsNTAG213WithOneFastReadAndTheUIDOfGetUID() throws {
            let harness = try harness(profile: .acr122u, personality: "acr122u")
            defer { harness.close() }
            let data = NDEF.hex(NDEF.tlv(NDEF.uri(NDEF.plingsURL)))
            for kind in ["ntag213", "ntag215", "ntag216"] {
                let (event, apdus) = try harness.tap(kind, uid: uid, data)
                #expect(event.read?.raw == NDEF.plingsURL)
                // Pages 0-39: the UID (pages 0-2), the CC (page 3) and the whole message, in one exchange.
                #expect(apdus == ["FF00000005D4423A0027"], "\(kind)")
                #expect(event.apduCount == 1)
                // The same tag on the plain reader: GET UID (FF CA) answers the same UID.
                let (plain, plainAPDUs) = try harness.tap(kind, uid: uid, data, reader: 1)
                #expect(plainAPDUs.first == "FFCA000000")
                #expect(event.read?.uid == plain.read?.uid && plain.read?.uid == uid.lowercased(), "\(kind)")
            }
        }

        @Test func part3ReadIsASessionAroundOneTransparentExchange() throws {
            let harness = try harness(profile: .identiv, personality: "part3")
            defer { harness.close() }
            let (event, apdus) = try harness.tap("ntag213", uid: uid, NDEF.hex(NDEF.tlv(NDEF.uri(NDEF.plingsURL))))
            #expect(event.read?.raw == NDEF.plingsURL)
            #expect(apdus == ["FFC20000028100", "FFC200010595033A0027", "FFC20000028200"])
            #expect(event.read?.uid == uid.lowercased())
        }

        @Test func plainReaderWithAFastProfileFallsBackOnceThenNeverTriesAgain() throws {
            let harness = try harness(profile: .acr122u, personality: "plain")
            defer { harness.close() }
            let data = NDEF.hex(NDEF.tlv(NDEF.uri(NDEF.plingsURL)))
            let (first, firstAPDUs) = try harness.tap("ntag213", uid: uid, data)
            #expect(first.read?.raw == NDEF.plingsURL)
            guard case .fellBack(_, let refused)? = first.result?.fastRead else {
                Issue.record("no fallback: \(String(describing: first.result?.fastRead))")
                return
            }
            #expect(refused)
            #expect(firstAPDUs.contains("FF00000005D4423A0027"))
            let (second, secondAPDUs) = try harness.tap("ntag213", uid: uid, data)
            #expect(second.read?.raw == NDEF.plingsURL)
            #expect(second.result?.fastRead == .notTried)
            #expect(!secondAPDUs.contains { $0.hasPrefix("FF000000") }, "\(secondAPDUs)")
            #expect(harness.logLines(containing: "fast read not available on this reader").count == 1)
            // The plain reader's card refuses FF 00 40 too (6A81): counted, the reads unaffected.
            #expect(eventually(timeout: 5) { harness.source.feedbackCounters.refused >= 1 })
        }

        @Test(arguments: [("acr122u", ReaderProfile.acr122u), ("part3", ReaderProfile.omnikey)])
        func badPassThroughRepliesFallBackForThatReadOnly(personality: String, profile: ReaderProfile) throws {
            let harness = try harness(profile: profile, personality: personality)
            defer { harness.close() }
            let data = NDEF.hex(NDEF.tlv(NDEF.uri(NDEF.plingsURL)))
            let (good, _) = try harness.tap("ntag213", uid: uid, data)
            #expect(good.result?.fastRead == .used)
            for fault in ["thru_short", "thru_garbage"] {
                let (event, apdus) = try harness.tap("ntag213", uid: uid, data, "fault=\(fault)")
                #expect(event.read?.raw == NDEF.plingsURL, "\(fault): \(event.error ?? "")")
                guard case .fellBack? = event.result?.fastRead else {
                    Issue.record("\(fault): \(String(describing: event.result?.fastRead))")
                    continue
                }
                #expect(apdus.contains("FFB0000310"), "\(fault): READ BINARY after the fallback")
            }
            let (again, _) = try harness.tap("ntag213", uid: uid, data)
            #expect(again.result?.fastRead == .used)
            // A refusal of the pass-through itself is remembered: READ BINARY from then on.
            let (refused, _) = try harness.tap("ntag213", uid: uid, data, "fault=thru_sw")
            #expect(refused.read?.raw == NDEF.plingsURL)
            guard case .fellBack(_, true)? = refused.result?.fastRead else {
                Issue.record("thru_sw: \(String(describing: refused.result?.fastRead))")
                return
            }
            let (after, apdus) = try harness.tap("ntag213", uid: uid, data)
            #expect(after.read?.raw == NDEF.plingsURL)
            #expect(after.result?.fastRead == .notTried)
            #expect(!apdus.contains { $0.hasPrefix("FF000000") || $0.hasPrefix("FFC2") })
        }

        // MARK: feedback

        /// Taps, waits for the commit, then for the reader's feedback; returns the feedback and the commit time.
        func tapAndWaitForFeedback(
            _ harness: NFCHarness, _ kind: String, _ data: String = "-", _ options: String = "", commits: Int = 1
        ) throws -> (feedback: [(time: Double, apdu: String)], committed: Double?) {
            let before = harness.taps.all.count
            try harness.rig.send("tap 0 \(kind) \(uid) \(data) \(options)")
            #expect(harness.taps.wait(count: before + 1))
            var feedback: [(time: Double, apdu: String)] = []
            _ = eventually(timeout: 5) {
                feedback = (try? harness.rig.feedback(0)) ?? []
                return feedback.contains { $0.apdu.hasPrefix("FF0040") }
            }
            let committed = harness.commits.wait(count: commits, timeout: 1) ? harness.commits.all[commits - 1] : nil
            try harness.rig.send("remove 0")
            return (feedback, committed)
        }

        @Test func acceptedUnrecognizedAndFailedGiveTheirPatternAfterTheCommit() throws {
            let harness = try harness(profile: .acr122u, personality: "acr122u", commit: true)
            defer { harness.close() }
            // accepted: green blink (P2 A0), 1 beep of 100 ms (T1 T2 01 01, N 01, buzzer during T1)
            let accepted = try tapAndWaitForFeedback(harness, "ntag213", "-", "url=\(NDEF.plingsURL)")
            #expect(accepted.feedback.map(\.apdu) == ["FF0040A00401010101"])
            let committed = try #require(accepted.committed)
            #expect(accepted.feedback[0].time >= committed)
            // unrecognized: both LEDs (P2 F0), 2 beeps
            let other = try tapAndWaitForFeedback(harness, "ntag213", "-", "url=https://example.com/p/1", commits: 2)
            #expect(other.feedback.map(\.apdu) == ["FF0040F00401010201"])
            #expect(other.feedback.first.map { $0.time >= (other.committed ?? .infinity) } == true)
            // failed: red blink (P2 50), 3 beeps; nothing is committed
            let failed = try tapAndWaitForFeedback(harness, "phone", "-", "", commits: 3)
            #expect(failed.feedback.map(\.apdu) == ["FF0040500401010301"])
            #expect(harness.spooledCount == 2)
            #expect(eventually(timeout: 5) { harness.source.feedbackCounters.sent == 3 })
        }

        @Test func noFeedbackWhenItIsOff() throws {
            let harness = try harness(profile: .acr122u, personality: "acr122u", commit: true) {
                $0.feedback.enabled = false
            }
            defer { harness.close() }
            try harness.rig.send("tap 0 ntag213 \(uid) - url=\(NDEF.plingsURL)")
            #expect(harness.commits.wait(count: 1))
            try harness.rig.send("hold 0.5")
            #expect(try harness.rig.feedback(0).isEmpty)
            try harness.rig.send("remove 0")
            #expect(harness.source.feedbackCounters == NFCFeedbackCounters())
        }

        @Test func tagRemovedBeforeFeedbackIsCountedAndCostsNothing() throws {
            let harness = try harness(profile: .acr122u, personality: "acr122u", commit: true)
            defer { harness.close() }
            let release = DispatchSemaphore(value: 0)
            harness.beforeCommitReport.set { _ = release.wait(timeout: .now() + 10) }
            try harness.rig.send("tap 0 ntag213 \(uid) - url=\(NDEF.plingsURL)")
            #expect(harness.commits.wait(count: 1))
            try harness.rig.send("remove 0")
            harness.beforeCommitReport.set(nil)
            release.signal()
            #expect(eventually(timeout: 5) { harness.source.feedbackCounters.tagGone == 1 })
            #expect(harness.spooledCount == 1)
            // The next tap reads and gets its feedback as usual.
            let next = try tapAndWaitForFeedback(harness, "ntag213", "-", "url=\(NDEF.plingsURL)", commits: 2)
            #expect(next.feedback.map(\.apdu) == ["FF0040A00401010101"])
            #expect(harness.spooledCount == 2)
            #expect(harness.taps.all.allSatisfy { $0.error == nil })
        }

        @Test func detectBeepIsSilencedOnceOnTheFirstTap() throws {
            let harness = try harness(profile: .acr122u, personality: "acr122u", commit: true) {
                $0.silenceDetectBeep = true
            }
            defer { harness.close() }
            let first = try tapAndWaitForFeedback(harness, "ntag213", "-", "url=\(NDEF.plingsURL)")
            #expect(first.feedback.map(\.apdu) == ["FF00520000", "FF0040A00401010101"])
            let second = try tapAndWaitForFeedback(harness, "ntag213", "-", "url=\(NDEF.plingsURL)", commits: 2)
            #expect(second.feedback.map(\.apdu) == ["FF0040A00401010101"])
            #expect(harness.logLines(containing: "detect beep turned off").count == 1)
        }
    }
}
