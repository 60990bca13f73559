import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// The real `plings-bridge readers` and `test-read` binaries against the rig.
extension NFCRigTests {
    @Suite struct NFCCLITests {
        let binary = Products.path("plings-bridge")

        func environment(_ dir: TemporaryDirectory) -> [String: String] {
            Products.isolatedEnvironment(home: dir.path, reachesPCSCD: true)
        }

        @Test func readersJSONShowsTheTagAndTestReadReadsIt() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let rig = try NFCRig()
            defer { rig.close() }
            try rig.send("tap 1 ntag213 04A1B2C3D4E5F6 - url=\(NDEF.plingsURL)")

            let readers = try ProcessRunner.run(
                binary, ["readers", "--json"], environment: environment(dir), timeout: 30)
            #expect(readers.status == 0, "\(readers.stderr)")
            let list = try JSONParser.parse(readers.stdout.trimmingASCIIWhitespace())
            guard case .array(let items) = list else {
                Issue.record("readers --json is not an array: \(readers.stdout)")
                return
            }
            #expect(items.count == 2)
            #expect(items.first?["name"] == .string("Virtual PCD 00 00"))
            // vpcd is no USB reader: no port, no serial, and it keeps its PC/SC name (issue 44).
            #expect(items.first?["path"] == .null && items.first?["serial"] == .null)
            #expect(items.first?["device"] == .string("Virtual PCD 00 00"))
            #expect(items.first?["cardPresent"] == .bool(false))
            let withTag = try #require(items.last)
            #expect(withTag["name"] == .string("Virtual PCD 00 01"))
            #expect(withTag["cardPresent"] == .bool(true))
            #expect(withTag["tagKind"] == .string("type2"))
            #expect(withTag["uid"] == .string("04a1b2c3d4e5f6"))
            #expect(withTag["atr"]?.stringValue?.hasPrefix("3B8F8001804F0CA0000003") == true)

            // A tag already on the reader when test-read starts is its first tap.
            let test = try ProcessRunner.run(
                binary, ["test-read", "--count", "1", "--json", "--timeout", "10", "--reader", "*01"],
                environment: environment(dir), timeout: 30)
            #expect(test.status == 0, "\(test.stderr)")
            let lines = test.stdoutLines
            #expect(lines.count == 2, "\(test.stdout)")
            let tap = try JSONParser.parse(try #require(lines.first))
            #expect(tap["ok"] == .bool(true))
            #expect(tap["url"] == .string(NDEF.plingsURL))
            #expect(tap["uid"] == .string("04a1b2c3d4e5f6"))
            #expect(tap["apduCount"] == .integer(NDEF.type2Minimum(end: 2 + NDEF.uri(NDEF.plingsURL).count)))
            #expect((tap["readMs"]?.doubleValue ?? -1) >= 0)
            let summary = try JSONParser.parse(try #require(lines.last))
            #expect(summary["summary"]?["ok"] == .integer(1))
            #expect(summary["summary"]?["failed"] == .integer(0))
        }

        /// The isolation every other suite's bridges rely on (`Products.isolatedEnvironment`): with the rig's pcscd
        /// up and a tag on its reader, a bridge given the default test environment finds no pcscd and no reader,
        /// while the same command with the rig's environment lists the reader with the tag.
        @Test func otherSuitesBridgesCannotReachTheRigsPCSCD() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let rig = try NFCRig()
            defer { rig.close() }
            try rig.send("tap 1 ntag213 04A1B2C3D4E5F6 - url=\(NDEF.plingsURL)")
            let isolated = try ProcessRunner.run(
                binary, ["readers", "--json"], environment: Products.isolatedEnvironment(home: dir.path), timeout: 30)
            #expect(isolated.stdout.trimmingASCIIWhitespace() == "[]", "\(isolated.stdout)")
            #expect(isolated.stderr.contains("pcscd not running"), "\(isolated.stderr)")
            let reaching = try ProcessRunner.run(
                binary, ["readers", "--json"], environment: environment(dir), timeout: 30)
            #expect(reaching.status == 0 && reaching.stdout.contains("Virtual PCD 00 01"), "\(reaching.stderr)")
        }

        /// Issue 44: `readers`, `test-read` and `doctor` say the name each reader's reads carry; `doctor` warns when
        /// one name covers two readers.
        @Test func readersTestReadAndDoctorSayEachReadersName() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let rig = try NFCRig()
            defer { rig.close() }
            try rig.send("tap 1 ntag213 04A1B2C3D4E5F6 - url=\(NDEF.plingsURL)")
            let named = dir.file("named.json")
            try Data(
                #"{"nfc": {"names": [{"reader": "Virtual PCD 00 01", "name": "gate-3-out"}, {"reader": "Virtual PCD 00 00", "name": "gate-3-in"}]}}"#
                    .utf8
            ).write(to: URL(fileURLWithPath: named))
            let readers = try ProcessRunner.run(
                binary, ["readers", "--json", "--config", named], environment: environment(dir), timeout: 30)
            guard case .array(let list) = try JSONParser.parse(readers.stdout.trimmingASCIIWhitespace()),
                list.count == 2
            else {
                Issue.record("readers --json: \(readers.stdout) \(readers.stderr)")
                return
            }
            #expect(list[0]["device"] == .string("gate-3-in"), "\(readers.stdout)")
            #expect(list[1]["device"] == .string("gate-3-out"), "\(readers.stdout)")
            let test = try ProcessRunner.run(
                binary, ["test-read", "--count", "1", "--json", "--timeout", "10", "--config", named],
                environment: environment(dir), timeout: 30)
            let tap = try JSONParser.parse(try #require(test.stdoutLines.first))
            #expect(tap["reader"] == .string("Virtual PCD 00 01") && tap["device"] == .string("gate-3-out"))
            #expect(tap["path"] == .null, "vpcd is not on USB")
            let doctor = try ProcessRunner.run(
                binary, ["doctor", "--no-hid", "--config", named], environment: environment(dir), timeout: 60)
            #expect(
                doctor.stdout.contains("[ok  ] reader names: gate-3-in = Virtual PCD 00 00 (port unknown: "),
                "\(doctor.stdout)")

            let shared = dir.file("shared.json")
            try Data(#"{"nfc": {"names": [{"reader": "Virtual PCD*", "name": "gate-3"}]}}"#.utf8)
                .write(to: URL(fileURLWithPath: shared))
            let warned = try ProcessRunner.run(
                binary, ["doctor", "--no-hid", "--config", shared], environment: environment(dir), timeout: 60)
            #expect(
                warned.stdout.contains(
                    "[warn] reader names: 2 readers are named 'gate-3' (Virtual PCD 00 00, Virtual PCD 00 01)"),
                "\(warned.stdout)")
        }

        @Test func testReadExitsNonZeroWhenTheReadFails() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let rig = try NFCRig()
            defer { rig.close() }
            try rig.send("tap 0 phone 08112233 -")
            let test = try ProcessRunner.run(
                binary, ["test-read", "--count", "1", "--json", "--timeout", "10"], environment: environment(dir),
                timeout: 30)
            #expect(test.status == 1)
            let tap = try JSONParser.parse(try #require(test.stdoutLines.first))
            #expect(tap["ok"] == .bool(false))
            #expect(tap["error"]?.stringValue?.contains("phone") == true)
        }

        @Test func readersAndTestReadShowTheProfileAndWhatItSupports() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let config = dir.file("config.json")
            try #"{"nfc": {"profiles": [{"reader": "PCD 00 00", "profile": "acr122u"}]}}"#.write(
                toFile: config, atomically: true, encoding: .utf8)
            let rig = try NFCRig()
            defer { rig.close() }
            try rig.setReader(0, "acr122u")
            let readers = try ProcessRunner.run(
                binary, ["readers", "--json", "--config", config], environment: environment(dir), timeout: 30)
            #expect(readers.status == 0, "\(readers.stderr)")
            guard case .array(let items) = try JSONParser.parse(readers.stdout.trimmingASCIIWhitespace()) else {
                Issue.record("readers --json is not an array: \(readers.stdout)")
                return
            }
            #expect(items.first?["profile"] == .string("acr122u"))
            #expect(items.first?["feedback"] == .string("ledBuzzerAPDU"))
            #expect(items.first?["fastRead"] == .string("inCommunicateThru"))
            #expect(items.first?["detectBeepSilencing"] == .bool(true))
            #expect(items.last?["profile"] == .string("plain"))
            #expect(items.last?["feedback"] == .null && items.last?["fastRead"] == .null)
            let human = try ProcessRunner.run(
                binary, ["readers", "--config", config], environment: environment(dir), timeout: 30)
            #expect(
                human.stdout.contains(
                    "  profile: acr122u (feedback: LED/buzzer pseudo-APDU; fast read: PN533 InCommunicateThru)"),
                "\(human.stdout)")
            #expect(human.stdout.contains("  profile: plain (no feedback, no fast read)"))

            try rig.send("tap 0 ntag213 04A1B2C3D4E5F6 - url=\(NDEF.plingsURL)")
            let report = dir.file("report.html")
            let test = try ProcessRunner.run(
                binary,
                ["test-read", "--count", "1", "--json", "--timeout", "10", "--config", config, "--report", report],
                environment: environment(dir), timeout: 30)
            #expect(test.status == 0, "\(test.stderr)")
            let tap = try JSONParser.parse(try #require(test.stdoutLines.first))
            #expect(tap["profile"] == .string("acr122u"))
            // The version the rig's ACR122U gives to Get Firmware Version (FF 00 48 00 00), in the tap and the
            // report's setup.
            #expect(tap["firmware"] == .string("ACR122U207"))
            let page = try String(contentsOfFile: report, encoding: .utf8)
            #expect(page.contains("<th>firmware</th><td>ACR122U207</td>"), "\(page.prefix(3000))")
            #expect(tap["fastRead"] == .string("used"))
            #expect(tap["fastReadFallback"] == .null)
            // One FAST_READ of pages 0-39 (NTAG213/215/216 datasheet): the UID, the CC and the message.
            #expect(tap["apduCount"] == .integer(1))
            #expect(tap["uid"] == .string("04a1b2c3d4e5f6"))
            #expect(tap["url"] == .string(NDEF.plingsURL))
        }

        /// ISO 15693 (Type 5) tags through the real pcscd: read on a reader with the omnikey profile (one READ BINARY
        /// of block 0, one of 16 blocks), block by block when the tag refuses multiple blocks; on a plain reader the
        /// tap says "this reader cannot read ISO 15693", and doctor says which reader can.
        @Test func type5TagsAreReadOnISO15693ReadersAndOtherReadersSaySo() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let config = dir.file("config.json")
            try #"{"nfc": {"profiles": [{"reader": "PCD 00 00", "profile": "omnikey"}]}}"#.write(
                toFile: config, atomically: true, encoding: .utf8)
            let rig = try NFCRig()
            defer { rig.close() }
            func testRead(_ reader: String) throws -> JSONValue {
                let test = try ProcessRunner.run(
                    binary,
                    ["test-read", "--count", "1", "--json", "--timeout", "10", "--config", config, "--reader", reader],
                    environment: environment(dir), timeout: 30)
                return try JSONParser.parse(try #require(test.stdoutLines.first, "\(test.stderr)"))
            }
            try rig.send("tap 0 icodeslix E004015012345678 - url=\(NDEF.plingsURL)")
            let slix = try testRead("*00")
            #expect(slix["ok"] == .bool(true), "\(slix)")
            #expect(slix["tagKind"] == .string("type5") && slix["tagName"] == .string("ICODESLI (Type 5)"))
            #expect(slix["url"] == .string(NDEF.plingsURL))
            // The UID as ISO/IEC 15693-3 and the tag's label write it (E0 first); the reader hands it over reversed.
            #expect(slix["uid"] == .string("e004015012345678"))
            // GET UID, block 0 (the CC E1 40 0E 01 says MBREAD), blocks 1-16 in one READ BINARY.
            #expect(try rig.apdus(0) == ["FFCA000000", "FFB0000000", "FFB0000140"])
            // `readers` writes it the same way.
            let readers = try ProcessRunner.run(
                binary, ["readers", "--json", "--config", config], environment: environment(dir), timeout: 30)
            guard case .array(let listed) = try JSONParser.parse(readers.stdout.trimmingASCIIWhitespace()) else {
                Issue.record("readers --json is not an array: \(readers.stdout) \(readers.stderr)")
                return
            }
            let first = listed.first { $0["name"]?.stringValue?.hasSuffix("00 00") == true }
            #expect(first?["uid"] == .string("e004015012345678"), "\(listed)")
            try rig.send("remove 0")

            try rig.send("tap 0 st25dv64k E002230012345678 - url=\(NDEF.plingsURL) fault=no_multi")
            let st = try testRead("*00")
            #expect(st["url"] == .string(NDEF.plingsURL) && st["tagName"] == .string("ISO 15693 tag (Type 5)"))
            // The 8-byte CC takes blocks 0 and 1; the refused 16-block read; then blocks 2-16, one at a time.
            let apdus = try rig.apdus(0)
            #expect(Array(apdus.prefix(4)) == ["FFCA000000", "FFB0000000", "FFB0000104", "FFB0000240"], "\(apdus)")
            #expect(apdus.dropFirst(4) == ArraySlice((2...16).map { "FFB000" + String(format: "%02X", $0) + "04" }))
            try rig.send("remove 0")

            try rig.send("tap 1 icodeslix E004015012345678 - url=\(NDEF.plingsURL)")
            let plain = try testRead("*01")
            #expect(plain["url"] == .null && plain["uid"] == .string("e004015012345678"))
            #expect(plain["noURLReason"]?.stringValue?.hasPrefix("this reader cannot read ISO 15693") == true)
            #expect(try rig.apdus(1) == ["FFCA000000"])

            let doctor = try ProcessRunner.run(
                binary, ["doctor", "--json", "--config", config, "--no-hid", "--no-location"],
                environment: environment(dir), timeout: 30)
            guard case .array(let checks) = try JSONParser.parse(doctor.stdout.trimmingASCIIWhitespace()) else {
                Issue.record("doctor --json is not an array: \(doctor.stdout)")
                return
            }
            let iso = try #require(checks.first { $0["name"] == .string("iso15693") }, "\(doctor.stdout)")
            #expect(iso["status"] == .string("ok"))
            #expect(
                iso["message"]?.stringValue
                    == "ISO 15693 (Type 5) tags read by Virtual PCD 00 00; this reader cannot read ISO 15693: "
                    + "Virtual PCD 00 01 (profile plain)", "\(iso)")
        }

        /// Needs the machine without a pcscd (the rig serializes on /tmp/pcscd.lock; a system pcscd skips it).
        @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/run/pcscd/pcscd.comm")))
        func readersWithoutPcscdIsAnEmptyArray() throws {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let readers = try ProcessRunner.run(
                binary, ["readers", "--json"], environment: environment(dir), timeout: 30)
            #expect(readers.status == 0)
            #expect(readers.stdout.trimmingASCIIWhitespace() == "[]")
            #expect(readers.stderr.contains("pcscd not running"))
        }
    }
}
