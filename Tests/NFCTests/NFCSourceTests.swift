import BridgeCore
import BridgeTestSupport
import Foundation
import NFC
import Testing

/// `NFCSource` against a real pcscd with the vpcd virtual readers and the tag emulator (no PC/SC mocks).
/// Serialized: there is one pcscd per machine (run under `flock /tmp/pcscd.lock`).
extension NFCRigTests {
    @Suite struct NFCSourceTests {
        let uid = "04A1B2C3D4E5F6"

        // MARK: tag kinds with a Plings URL

        @Test(arguments: ["ntag213", "ntag215", "ntag216"])
        func type2TagWithPlingsURLIsReadOnceWithTheMinimumAPDUs(kind: String) throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let message = NDEF.uri(NDEF.plingsURL)
            let (event, apdus) = try harness.tap(kind, uid: uid, NDEF.hex(NDEF.tlv(message)))
            #expect(event.error == nil)
            let read = try #require(harness.reads.all.first)
            #expect(read.sourceKind == .nfc)
            #expect(read.device == "Virtual PCD 00 00")
            #expect(read.uid == "04a1b2c3d4e5f6")
            #expect(read.raw == NDEF.plingsURL)
            #expect(read.noURLReason == nil)
            #expect(event.kind.code == "type2")
            let minimum = NDEF.type2Minimum(end: 2 + message.count)
            #expect(apdus.count == minimum, "\(apdus)")
            #expect(event.apduCount == minimum)
            #expect(event.result?.apduCount == minimum)
            #expect(abs(read.time.timeIntervalSinceNow) < 10)
        }

        /// Issue 44: `nfc.names` names a reader; vpcd gives no USB channel, so a rule on a USB port never matches it
        /// and the reader is named by its PC/SC name pattern.
        @Test func aReaderCarriesTheNameItsRuleGives() throws {
            let harness = try NFCHarness(configure: {
                $0.names = [
                    .init(path: "*", name: "by-port"), .init(reader: "Virtual PCD 00 00", name: "gate-3-in"),
                ]
            })
            defer { harness.close() }
            let (event, _) = try harness.tap("ntag213", uid: uid, NDEF.hex(NDEF.tlv(NDEF.uri(NDEF.plingsURL))))
            #expect(event.error == nil)
            let read = try #require(harness.reads.all.first)
            #expect(read.device == "gate-3-in")
            #expect(event.reader == "Virtual PCD 00 00")
            let found = harness.logLines(containing: "NFC reader found").filter { $0.contains("Virtual PCD 00 00") }
            #expect(found.count == 1, "\(harness.log)")
            #expect(found.first?.contains("device=gate-3-in") == true, "\(found)")
            #expect(found.first?.contains("path=unknown") == true, "\(found)")
        }

        @Test func type4TagWithPlingsURLIsReadInChunksOfMLe() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let message = NDEF.uri(NDEF.plingsURL)
            let (event, apdus) = try harness.tap("type4", uid: "04112233445566", NDEF.hex(message), "mle=0x20")
            #expect(event.error == nil, "\(event.error ?? "")")
            #expect(event.kind == .type4)
            let read = try #require(harness.reads.all.first)
            #expect(read.raw == NDEF.plingsURL)
            #expect(read.uid == "04112233445566")
            #expect(
                apdus.count == NDEF.type4Minimum(messageLength: message.count, mle: 0x20),
                "\(apdus) taps=\(harness.taps.all.count) \(harness.log)")
        }

        /// An NTAG 424 DNA "SUN" URL: the tag mirrors encrypted PICC data and a CMAC into its URL on every tap (NXP
        /// AN12196; the values are its example's, the UID the one its decrypted PICCData holds). On a Plings URL it
        /// is kept byte-exact as read, for whoever holds the keys, and still parsed for `i` and `p`; the bridge
        /// holds no key and checks nothing.
        @Test func aSecureDynamicURLIsKeptByteExact() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let url = NDEF.plingsURL + "&picc_data=EF963FF7828658A599F3041510671E88&cmac=94EED9EE65337086"
            let (event, _) = try harness.tap("type4", uid: "04DE5F1EACC040", NDEF.hex(NDEF.uri(url)))
            #expect(event.error == nil, "\(event.error ?? "")")
            let read = try #require(harness.reads.all.first)
            #expect(read.raw == url)
            guard case .success(let id) = PlingsURLParser().parse(read.raw) else {
                Issue.record("not a Plings URL: \(read.raw)")
                return
            }
            #expect(id.identifier == "4kyQCd5tMDjJVWJKRzVT" && id.path == "4.2.3.3.6")
        }

        // MARK: TLV and record layouts

        @Test func threeByteLengthTLVWithALongMessage() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let url = NDEF.plingsURL + "&x=" + String(repeating: "a", count: 300)
            let message = NDEF.longURIRecord(url)
            let (event, apdus) = try harness.tap("ntag215", uid: uid, NDEF.hex(NDEF.tlv(message)))
            #expect(message.count > 255)
            #expect(event.error == nil, "\(event.error ?? "")")
            #expect(harness.reads.all.first?.raw == url)
            #expect(apdus.count == NDEF.type2Minimum(end: 4 + message.count))
        }

        @Test func lockControlTLVBeforeTheNDEFTLVIsSkipped() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let lock: [UInt8] = [0x01, 0x03, 0xA0, 0x10, 0x44]
            let message = NDEF.uri(NDEF.plingsURL)
            let (event, apdus) = try harness.tap("ntag213", uid: uid, NDEF.hex(lock + NDEF.tlv(message)))
            #expect(event.error == nil, "\(event.error ?? "")")
            #expect(harness.reads.all.first?.raw == NDEF.plingsURL)
            #expect(apdus.count == NDEF.type2Minimum(end: lock.count + 2 + message.count))
        }

        @Test func smartPosterURIIsTheRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let inner = NDEF.uri(NDEF.plingsURL, first: true, last: false) + NDEF.text("Plings gate", first: false)
            let (event, _) = try harness.tap("ntag213", uid: uid, NDEF.hex(NDEF.tlv(NDEF.smartPoster(inner))))
            #expect(event.error == nil, "\(event.error ?? "")")
            #expect(harness.reads.all.first?.raw == NDEF.plingsURL)
        }

        @Test func textRecordBeforeTheURIRecord() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let message = NDEF.text("hello", first: true, last: false) + NDEF.uri(NDEF.plingsURL, first: false)
            let (event, _) = try harness.tap("ntag213", uid: uid, NDEF.hex(NDEF.tlv(message)))
            #expect(event.error == nil, "\(event.error ?? "")")
            #expect(harness.reads.all.first?.raw == NDEF.plingsURL)
        }

        @Test func plingsURLIsPreferredOverAnEarlierForeignURL() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let message =
                NDEF.uri("https://example.com/a", first: true, last: false) + NDEF.uri(NDEF.plingsURL, first: false)
            let (event, _) = try harness.tap("ntag213", uid: uid, NDEF.hex(NDEF.tlv(message)))
            #expect(event.result?.uris == ["https://example.com/a", NDEF.plingsURL])
            #expect(harness.reads.all.first?.raw == NDEF.plingsURL)
        }

        @Test func readerReturningFourBytesPerReadStillReadsWithTheMinimumAPDUs() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let message = NDEF.uri(NDEF.plingsURL)
            let (event, apdus) = try harness.tap("ntag213", uid: uid, NDEF.hex(NDEF.tlv(message)), "fault=short4")
            #expect(event.error == nil, "\(event.error ?? "")")
            #expect(harness.reads.all.first?.raw == NDEF.plingsURL)
            #expect(apdus.count == NDEF.type2Minimum(end: 2 + message.count, perRead: 4), "\(apdus)")
        }

        // MARK: reads without a Plings URL

        @Test func nonPlingsURLIsReadWithTheRawURL() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, _) = try harness.tap("ntag213", uid: uid, "-", "url=https://example.com/product/42")
            #expect(event.error == nil)
            let read = try #require(harness.reads.all.first)
            #expect(read.raw == "https://example.com/product/42")
            #expect(read.noURLReason == nil)
            #expect(read.uid == "04a1b2c3d4e5f6")
        }

        @Test func blankTagIsAReadWithItsUIDAndAReason() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, _) = try harness.tap("blank", uid: uid)
            #expect(event.error == nil, "\(event.error ?? "")")
            let read = try #require(harness.reads.all.first)
            #expect(read.raw == "")
            #expect(read.uid == "04a1b2c3d4e5f6")
            #expect(read.noURLReason?.isEmpty == false)
        }

        // MARK: bad tags and bad luck: one log line, no read, the next tap reads

        @Test func truncatedTLVIsOneLogLineAndNoRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            // NDEF TLV declaring 200 bytes in an NTAG213's 144-byte data area.
            let image: [UInt8] = [0x03, 200] + NDEF.uri(NDEF.plingsURL)
            let (event, _) = try harness.tap("ntag213", uid: uid, NDEF.hex(image))
            #expect(event.error?.contains("200") == true, "\(event.error ?? "")")
            try expectRecovery(harness, failures: 1)
        }

        @Test func garbageStatusWordsAreOneLogLineAndNoRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, _) = try harness.tap("ntag213", uid: uid, "-", "url=\(NDEF.plingsURL) fault=garbage_sw sw=6F00")
            #expect(event.error?.contains("6F00") == true, "\(event.error ?? "")")
            try expectRecovery(harness, failures: 1)
        }

        @Test func removalMidReadIsOneLogLineAndTheNextTapReads() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, _) = try harness.tap("ntag215", uid: uid, "-", "url=\(NDEF.plingsURL) fault=remove_after=2")
            #expect(event.error?.contains("removed") == true, "\(event.error ?? "")")
            try expectRecovery(harness, failures: 1)
        }

        @Test func phoneIsOneClearLogLineAndNoRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, _) = try harness.tap("phone", uid: "08112233")
            #expect(event.error?.contains("phone") == true, "\(event.error ?? "")")
            #expect(harness.logLines(containing: "phone or a bank card").count == 1)
            try expectRecovery(harness, failures: 1)
        }

        /// After `failures` failed taps: nothing submitted, one log line each, and a good tap reads.
        func expectRecovery(_ harness: NFCHarness, failures: Int) throws {
            #expect(harness.reads.all.isEmpty)
            #expect(harness.logLines(containing: "NFC read failed").count == failures, "\(harness.log)")
            let (event, _) = try harness.tap("ntag213", uid: "04010203040506", "-", "url=\(NDEF.plingsURL)")
            #expect(event.error == nil)
            #expect(harness.reads.all.map(\.uid) == ["04010203040506"])
            #expect(harness.taps.all.count == failures + 1, "no retry storm")
        }

        // MARK: one read per tap

        @Test func heldTagIsReadOnce() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            try harness.rig.send("tap 0 ntag213 \(uid) - url=\(NDEF.plingsURL)")
            #expect(harness.taps.wait(count: 1))
            // pcscd polls the reader every 400 ms: 2 s is five polls with the tag lying there.
            try harness.rig.send("hold 2")
            let apdus = try harness.rig.apdus()
            try harness.rig.send("remove 0")
            #expect(apdus.count == NDEF.type2Minimum(end: 2 + NDEF.uri(NDEF.plingsURL).count), "read once: \(apdus)")
            // A second tag's read is the barrier: everything before it was handled.
            _ = try harness.tap("ntag213", uid: "04010203040506", "-", "url=\(NDEF.plingsURL)")
            #expect(harness.reads.all.map(\.uid) == ["04a1b2c3d4e5f6", "04010203040506"])
        }

        @Test func tagRemovedAndTappedAgainBetweenTwoWaitsIsANewRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            // Hold the source's thread inside the first tap's report, so the removal and the second tap both
            // happen before its next wait: the reader shows PRESENT before and after, only the counter moved.
            let release = DispatchSemaphore(value: 0)
            harness.onTap.set { _ in _ = release.wait(timeout: .now() + 20) }
            try harness.rig.send("tap 0 ntag213 \(uid) - url=\(NDEF.plingsURL)")
            #expect(harness.taps.wait(count: 1))
            try harness.rig.send("remove 0")
            try harness.rig.send("tap 0 ntag213 04010203040506 - url=\(NDEF.plingsURL)")
            harness.onTap.set(nil)
            release.signal()
            #expect(harness.taps.wait(count: 2))
            try harness.rig.send("remove 0")
            #expect(harness.reads.all.map(\.uid) == ["04a1b2c3d4e5f6", "04010203040506"])
        }

        /// A factory-fresh MIFARE Classic (transport keys, no MAD): its UID, and why there is no URL.
        @Test func mifareClassicWithoutAMADIsAReadWithItsUIDOnly() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, apdus) = try harness.tap("mifare1k", uid: "A1B2C3D4")
            #expect(event.error == nil)
            let read = try #require(harness.reads.all.first)
            #expect(read.uid == "a1b2c3d4")
            #expect(read.raw == "")
            #expect(read.noURLReason?.contains("MIFARE Classic without a MAD") == true, "\(read.noURLReason ?? "")")
            // GET UID, LOAD KEYS with the MAD key (NXP AN10787), GENERAL AUTHENTICATE of block 0: refused.
            #expect(apdus == ["FFCA000000", "FF82000006A0A1A2A3A4A5", "FF860000050100006000"])
        }

        /// NDEF-formatted MIFARE Classic 1K and 4K (NXP AN1305 over the MAD): the Plings URL, read with the public
        /// keys only; a wrong MAD CRC and private NDEF keys give a reason instead.
        @Test func mifareClassicNDEFIsReadThroughTheMAD() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            for kind in ["mifare1k", "mifare4k"] {
                let before = harness.reads.all.count
                let (event, apdus) = try harness.tap(kind, uid: "A1B2C3D4", "-", "url=\(NDEF.plingsURL)")
                #expect(event.error == nil, "\(event.error ?? "")")
                let read = try #require(harness.reads.all.dropFirst(before).first)
                #expect(read.raw == NDEF.plingsURL && read.uid == "a1b2c3d4", "\(kind): \(read)")
                // Only the two public keys are ever loaded.
                #expect(
                    Set(apdus.filter { $0.hasPrefix("FF82") }) == ["FF82000006A0A1A2A3A4A5", "FF82000006D3F7D3F7D3F7"])
                // Sector 0's trailer (block 3) for the General Purpose Byte: C1 (MAD1) on the 1K, C2 (MAD2) on the
                // 4K, which then reads its MAD2 in sector 16 (blocks 64-66) too.
                #expect(apdus.contains("FFB0000310"), "\(apdus)")
                #expect(apdus.contains("FFB0004010") == (kind == "mifare4k"), "\(apdus)")
            }
            for (option, reason) in [
                ("classic=badcrc", "MIFARE Classic MAD: CRC"),
                ("classic=private", "refused the NFC Forum public key"),
            ] {
                let before = harness.reads.all.count
                _ = try harness.tap("mifare1k", uid: "A1B2C3D4", "-", "url=\(NDEF.plingsURL) \(option)")
                let read = try #require(harness.reads.all.dropFirst(before).first)
                #expect(read.raw == "" && read.noURLReason?.contains(reason) == true, "\(read.noURLReason ?? "")")
            }
        }

        @Test func tagWithoutAUIDAnswerIsStillRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            let (event, _) = try harness.tap("ntag213", uid: uid, "-", "url=\(NDEF.plingsURL) fault=no_uid")
            #expect(event.error == nil)
            let read = try #require(harness.reads.all.first)
            #expect(read.uid == nil)
            #expect(read.raw == NDEF.plingsURL)
        }

        @Test func twoTapsOfTheSameTagAreTwoReads() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            _ = try harness.tap("ntag213", uid: uid, "-", "url=\(NDEF.plingsURL)")
            _ = try harness.tap("ntag213", uid: uid, "-", "url=\(NDEF.plingsURL)")
            #expect(harness.reads.all.count == 2)
            #expect(harness.reads.all.allSatisfy { $0.raw == NDEF.plingsURL && $0.uid == "04a1b2c3d4e5f6" })
            #expect(harness.reads.all[0].time < harness.reads.all[1].time)
        }

        @Test func readerPatternsSelectReaders() throws {
            let harness = try NFCHarness(patterns: ["Virtual PCD * 01"])
            defer { harness.close() }
            try harness.rig.send("tap 0 ntag213 \(uid) - url=\(NDEF.plingsURL)")
            try harness.rig.send("remove 0")
            let (event, _) = try harness.tap("ntag213", uid: "04010203040506", "-", "url=\(NDEF.plingsURL)", reader: 1)
            #expect(event.reader == "Virtual PCD 00 01")
            #expect(harness.reads.all.map(\.device) == ["Virtual PCD 00 01"])
            #expect(harness.source.summary == "1 reader: Virtual PCD 00 01")
            #expect(harness.source.state.isUp)
        }

        // MARK: pcscd lifecycle

        @Test func pcscdKilledAndRestartedWhileRunningTheNextTapIsRead() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            _ = try harness.tap("ntag213", uid: uid, "-", "url=\(NDEF.plingsURL)")
            try harness.rig.send("kill-pcscd KILL")
            #expect(eventually(timeout: 10) { harness.source.summary.hasPrefix("pcscd") })
            #expect(!harness.source.state.isUp, "pcscd gone: no reader is watched")
            try harness.rig.send("start-pcscd")
            let (event, _) = try harness.tap("ntag213", uid: "04010203040506", "-", "url=\(NDEF.plingsURL)")
            #expect(event.error == nil)
            #expect(harness.reads.all.map(\.uid) == ["04a1b2c3d4e5f6", "04010203040506"])
            #expect(harness.logLines(containing: "lost the pcscd connection").count == 1, "\(harness.log)")
            #expect(harness.logLines(containing: "pcscd not running").count <= 1, "no log flood: \(harness.log)")
        }

        @Test func pcscdAbsentAtStartThenStarted() throws {
            let harness = try NFCHarness(rigArguments: ["--no-pcscd"])
            defer { harness.close() }
            #expect(eventually(timeout: 10) { harness.source.summary == "pcscd not running: waiting" })
            try harness.rig.send("start-pcscd")
            let (event, _) = try harness.tap("ntag216", uid: uid, "-", "url=\(NDEF.plingsURL)")
            #expect(event.error == nil)
            #expect(harness.reads.all.first?.raw == NDEF.plingsURL)
            #expect(harness.logLines(containing: "pcscd not running").count == 1, "\(harness.log)")
            #expect(harness.source.summary == "2 readers: Virtual PCD 00 00, Virtual PCD 00 01")
        }

        @Test func stopReturnsWithinOneSecondWhileWaiting() throws {
            let harness = try NFCHarness()
            defer { harness.close() }
            #expect(eventually(timeout: 10) { harness.source.summary.hasPrefix("2 readers") })
            let start = Date()
            harness.source.stop()
            #expect(Date().timeIntervalSince(start) < 1.0)
            #expect(harness.logLines(containing: "did not stop").isEmpty)
        }
    }
}
