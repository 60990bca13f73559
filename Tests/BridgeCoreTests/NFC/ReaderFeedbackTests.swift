import Testing

@testable import BridgeCore

// Expected bytes are written out from the ACS manuals (ACR122U API: "Bi-Color LED and Buzzer Control",
// "Set buzzer output during card detection"; ACR1252U/ACM1252U reference: "LED Control", "Buzzer Control",
// "Read/Set LED and Buzzer Status Indicator Behavior") and pcsc-lite's SCARD_CTL_CODE, not from the code.

/// A reader that records what it receives; escapes on `SCARD_CTL_CODE(3500)` fail unless `acsccid`.
struct RecordingChannel: ReaderControlChannel {
    var acsccid = false
    var behaviour: UInt8 = 0x7F
    var ledState: UInt8 = 0x02
    var tagPresent = true
    var apduReply: [UInt8] = [0x90, 0x00]
    var transmitted: [[UInt8]] = []
    var controls: [(code: UInt32, bytes: [UInt8])] = []
    var pauses: [Int] = []

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        guard tagPresent else { throw .cardRemoved }
        transmitted.append(apdu)
        return apduReply
    }

    mutating func control(code: UInt32, _ command: [UInt8]) throws(CardTransportError) -> [UInt8] {
        controls.append((code, command))
        // libccid refuses SCARD_CTL_CODE(3500): it is acsccid's; acsccid would refuse libccid's code.
        guard code == (acsccid ? 0x4200_0DAC : 0x4200_0001) else { throw .failed("SCARD_E_UNSUPPORTED_FEATURE") }
        switch Array(command.prefix(4)) {
        case [0xE0, 0x00, 0x00, 0x21] where command.count == 5: return [0xE1, 0, 0, 0, 1, behaviour]
        case [0xE0, 0x00, 0x00, 0x21]:
            behaviour = command[5]
            return [0xE1, 0, 0, 0, 1, behaviour]
        case [0xE0, 0x00, 0x00, 0x29] where command.count == 5: return [0xE1, 0, 0, 0, 1, ledState]
        default: return [0xE1, 0, 0, 0, 1, 0]
        }
    }

    mutating func pause(milliseconds: Int) { pauses.append(milliseconds) }
}

@Suite struct ReaderFeedbackTests {
    @Test("ACR122U LED/buzzer pseudo-APDU per pattern (manual's P2 bits, T1/T2 in 100 ms, link to buzzer)")
    func acr122uPatterns() {
        // green blink (bit 7 mask + bit 5 initial on), 1 x 100 ms, buzzer during T1
        #expect(
            ReaderCommands.acr122uLEDBuzzer(.init(led: .green, beeps: 1, milliseconds: 100))
                == [0xFF, 0x00, 0x40, 0xA0, 0x04, 0x01, 0x01, 0x01, 0x01])
        // red blink (bits 6 and 4), 3 x 200 ms
        #expect(
            ReaderCommands.acr122uLEDBuzzer(.init(led: .red, beeps: 3, milliseconds: 200))
                == [0xFF, 0x00, 0x40, 0x50, 0x04, 0x02, 0x02, 0x03, 0x01])
        // both LEDs, no beep: link to buzzer 00, one repetition so the LED still blinks
        #expect(
            ReaderCommands.acr122uLEDBuzzer(.init(led: .orange, beeps: 0, milliseconds: 500))
                == [0xFF, 0x00, 0x40, 0xF0, 0x04, 0x05, 0x05, 0x01, 0x00])
        // buzzer only: P2 = 00
        #expect(
            ReaderCommands.acr122uLEDBuzzer(.init(led: .none, beeps: 2, milliseconds: 100))
                == [0xFF, 0x00, 0x40, 0x00, 0x04, 0x01, 0x01, 0x02, 0x01])
        #expect(ReaderCommands.acr122uLEDBuzzer(.off) == nil)
    }

    @Test("ACR122U feedback goes through SCardTransmit; SW1 90 with the LED state in SW2 is success")
    func acr122uSend() {
        var runner = FeedbackRunner()
        var channel = RecordingChannel(apduReply: [0x90, 0x02])
        let delivery = runner.send(
            .init(led: .green, beeps: 1, milliseconds: 100), profile: .acr122u, channel: &channel)
        #expect(delivery == .sent)
        #expect(channel.transmitted == [[0xFF, 0x00, 0x40, 0xA0, 0x04, 0x01, 0x01, 0x01, 0x01]])
        #expect(channel.controls.isEmpty)

        var refusing = RecordingChannel(apduReply: [0x63, 0x00])
        #expect(
            runner.send(.init(led: .red, beeps: 1, milliseconds: 100), profile: .acr122u, channel: &refusing)
                == .refused("reader answered 63 00 to FF 00 40 50"))
        var gone = RecordingChannel(tagPresent: false)
        #expect(
            runner.send(.init(led: .red, beeps: 1, milliseconds: 100), profile: .acr122u, channel: &gone) == .tagGone)
    }

    @Test("plain, Omnikey and Identiv profiles send nothing; an off pattern sends nothing")
    func nothingSent() {
        var runner = FeedbackRunner()
        for profile in [ReaderProfile.plain, .omnikey, .identiv] {
            var channel = RecordingChannel()
            #expect(
                runner.send(.init(led: .green, beeps: 1, milliseconds: 100), profile: profile, channel: &channel)
                    == .skipped)
            #expect(channel.transmitted.isEmpty && channel.controls.isEmpty)
        }
        var channel = RecordingChannel()
        #expect(runner.send(.off, profile: .acr122u, channel: &channel) == .skipped)
        #expect(channel.transmitted.isEmpty)
    }

    @Test("ACR1252U escapes: acsccid's SCARD_CTL_CODE(3500) = 0x42000DAC first, libccid's SCARD_CTL_CODE(1) after")
    func acr1252uEscapesWithLibccid() {
        var runner = FeedbackRunner()
        var channel = RecordingChannel(acsccid: false, ledState: 0x02)
        let delivery = runner.send(.init(led: .red, beeps: 2, milliseconds: 100), profile: .acr1252u, channel: &channel)
        #expect(delivery == .sent)
        #expect(channel.controls.first?.code == 0x4200_0DAC)
        #expect(runner.workingControlCode == 0x4200_0001)
        let sent = channel.controls.filter { $0.code == 0x4200_0001 }.map(\.bytes)
        #expect(
            sent == [
                [0xE0, 0x00, 0x00, 0x29, 0x00],  // LED status (to restore)
                [0xE0, 0x00, 0x00, 0x29, 0x01, 0x01],  // red LED (bit 0)
                [0xE0, 0x00, 0x00, 0x28, 0x01, 0x0A],  // buzzer 10 x 10 ms
                [0xE0, 0x00, 0x00, 0x28, 0x01, 0x0A],
                [0xE0, 0x00, 0x00, 0x29, 0x01, 0x02],  // the LED state read before
            ])
        // The working code is remembered: the next feedback tries 3500 no more.
        var next = RecordingChannel(acsccid: false)
        _ = runner.send(.init(led: .green, beeps: 1, milliseconds: 100), profile: .acr1252u, channel: &next)
        #expect(next.controls.allSatisfy { $0.code == 0x4200_0001 })
        #expect(next.controls.contains { $0.bytes == [0xE0, 0x00, 0x00, 0x29, 0x01, 0x02] })
    }

    @Test("ACR1252U escapes refused by libccid (ifdDriverOptions without 0x01) are a refusal, not a crash")
    func escapesRefused() {
        struct Refusing: ReaderControlChannel {
            mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] { [0x90, 0x00] }
            mutating func control(code: UInt32, _ command: [UInt8]) throws(CardTransportError) -> [UInt8] {
                throw .failed("SCardControl: SCARD_E_UNSUPPORTED_FEATURE")
            }
            mutating func pause(milliseconds: Int) {}
        }
        var runner = FeedbackRunner()
        var channel = Refusing()
        #expect(
            runner.send(.init(led: .green, beeps: 1, milliseconds: 100), profile: .acr1252u, channel: &channel)
                == .refused("SCardControl: SCARD_E_UNSUPPORTED_FEATURE"))
    }

    @Test("detect beep: ACR122U FF 00 52 00 00; ACR1252U clears bit 3 of the behaviour byte, keeping the rest")
    func silenceDetectBeep() {
        var runner = FeedbackRunner()
        var acr122 = RecordingChannel()
        #expect(runner.silenceDetectBeep(profile: .acr122u, channel: &acr122) == .sent)
        #expect(acr122.transmitted == [[0xFF, 0x00, 0x52, 0x00, 0x00]])

        var acr1252 = RecordingChannel(acsccid: true, behaviour: 0x7F)
        var runner1252 = FeedbackRunner()
        #expect(runner1252.silenceDetectBeep(profile: .acr1252u, channel: &acr1252) == .sent)
        #expect(
            acr1252.controls.map(\.bytes) == [[0xE0, 0x00, 0x00, 0x21, 0x00], [0xE0, 0x00, 0x00, 0x21, 0x01, 0x77]])
        #expect(acr1252.controls.allSatisfy { $0.code == 0x4200_0DAC })
        // Already silent: read only.
        var silent = RecordingChannel(acsccid: true, behaviour: 0x77)
        #expect(runner1252.silenceDetectBeep(profile: .acr1252u, channel: &silent) == .skipped)
        #expect(silent.controls.map(\.bytes) == [[0xE0, 0x00, 0x00, 0x21, 0x00]])
        var plain = RecordingChannel()
        #expect(runner.silenceDetectBeep(profile: .plain, channel: &plain) == .skipped)
        #expect(plain.transmitted.isEmpty)
    }

    @Test("patterns parse from the config text; bad ones say why")
    func patternParsing() throws {
        #expect(try FeedbackPattern.parse("green 1x100").get() == .init(led: .green, beeps: 1, milliseconds: 100))
        #expect(try FeedbackPattern.parse("off").get() == .off)
        #expect(try FeedbackPattern.parse("none 2x300").get() == .init(led: .none, beeps: 2, milliseconds: 300))
        for (text, message) in [
            ("blue 1x100", "expected \"<green|red|orange|none> <beeps>x<ms>\" or \"off\", got \"blue 1x100\""),
            ("green 10x100", "beeps must be 0...9, got 10"),
            ("green 1x150", "the duration must be 100...2500 ms in steps of 100, got 150"),
            ("green", "expected \"<green|red|orange|none> <beeps>x<ms>\" or \"off\", got \"green\""),
        ] {
            guard case .failure(let error) = FeedbackPattern.parse(text) else {
                Issue.record("\(text) parsed")
                continue
            }
            #expect(error.message == message)
        }
    }

    @Test("profiles: recognised by PC/SC reader name; nfc.profiles substrings first, first match wins")
    func profiles() {
        #expect(ReaderProfile.recognize(readerName: "ACS ACR122U PICC Interface 00 00") == .acr122u)
        #expect(
            ReaderProfile.recognize(readerName: "ACS ACR1252 1S CL Reader [ACR1252 1S CL Reader(1)] 00 00") == .acr1252u
        )
        #expect(ReaderProfile.recognize(readerName: "ACS ACR1255U-J1 PICC Reader 00 00") == .acr1252u)
        #expect(ReaderProfile.recognize(readerName: "ACS ACM1252U-Z2 PICC 00 00") == .acr1252u)
        #expect(
            ReaderProfile.recognize(readerName: "HID Global OMNIKEY 5422 Smartcard Reader [OMNIKEY 5422CL] 01 00")
                == .omnikey)
        #expect(ReaderProfile.recognize(readerName: "HID Global OMNIKEY 5022 Smart Card Reader 00 00") == .omnikey)
        #expect(ReaderProfile.recognize(readerName: "Identiv uTrust 3700 F Contactless Reader 00 00") == .identiv)
        #expect(ReaderProfile.recognize(readerName: "Virtual PCD 00 00") == .plain)
        let rules = [
            ReaderProfile.Rule(reader: "PCD 00 01", profile: .omnikey),
            ReaderProfile.Rule(reader: "Virtual PCD", profile: .acr122u),
            ReaderProfile.Rule(reader: "PCD 00 00", profile: .identiv),
        ]
        #expect(ReaderProfile.resolve(readerName: "Virtual PCD 00 00", rules: rules) == .acr122u)
        #expect(ReaderProfile.resolve(readerName: "Virtual PCD 00 01", rules: rules) == .omnikey)
        #expect(ReaderProfile.resolve(readerName: "ACS ACR122U PICC Interface 00 00", rules: rules) == .acr122u)
        #expect(
            ReaderProfile.resolve(readerName: "ACS ACR122U", rules: [.init(reader: "ACR122", profile: .plain)])
                == .plain)
        #expect(
            ReaderProfile.acr122u.feedback == .ledBuzzerAPDU && ReaderProfile.acr122u.fastRead == .inCommunicateThru)
        #expect(ReaderProfile.plain.feedback == nil && ReaderProfile.plain.fastRead == nil)
    }
}

@Suite struct ReaderDriverFactsTests {
    @Test("ifdDriverOptions is read from libccid's Info.plist; bit 0x01 decides the escape check")
    func ifdDriverOptions() throws {
        let plist = """
            <key>ifdDriverOptions</key>
            \t<string>0x0000</string>
            \t<!-- Possible values for ifdDriverOptions
            \t0x01: DRIVER_OPTION_CCID_EXCHANGE_AUTHORIZED
            """
        #expect(ReaderDriverFacts.ifdDriverOptions(plist: plist) == 0)
        #expect(
            ReaderDriverFacts.ifdDriverOptions(plist: plist.replacingOccurrences(of: "0x0000", with: "0x0005")) == 5)
        #expect(ReaderDriverFacts.ifdDriverOptions(plist: "<key>other</key>") == nil)
        // The file Debian's libccid installs here, when present, parses too.
        if let real = try? String(
            contentsOfFile: "/usr/lib/pcsc/drivers/ifd-ccid.bundle/Contents/Info.plist", encoding: .utf8)
        {
            #expect(ReaderDriverFacts.ifdDriverOptions(plist: real) != nil)
        }
        let reader = ["ACS ACR1252 1S CL Reader 00 00"]
        let refused = ReaderDriverFacts.escapeCheck(readers: reader, acsccid: false, libccidOptions: 0, plistPath: "P")
        #expect(refused.status == .warn)
        #expect(refused.message.contains("bit 0x01 clear") && refused.fix.contains("ifdDriverOptions to 0x0001 in P"))
        #expect(
            ReaderDriverFacts.escapeCheck(readers: reader, acsccid: false, libccidOptions: 1, plistPath: "P").status
                == .ok)
        #expect(
            ReaderDriverFacts.escapeCheck(readers: reader, acsccid: true, libccidOptions: 0, plistPath: "P").status
                == .ok)
        #expect(
            ReaderDriverFacts.escapeCheck(readers: [], acsccid: false, libccidOptions: 0, plistPath: "P").status
                == .skip)
    }

    @Test("pn533_usb bound to a USB interface fails the check; loaded with an ACR122U attached warns")
    func pn533() {
        let held = ReaderDriverFacts.pn533Check(boundInterfaces: ["1-1:1.0"], acr122uAttached: true, moduleLoaded: true)
        #expect(held.status == .fail)
        #expect(held.message.contains("1-1:1.0") && held.fix.contains("blacklist pn533_usb"))
        #expect(
            ReaderDriverFacts.pn533Check(boundInterfaces: [], acr122uAttached: true, moduleLoaded: true).status == .warn
        )
        #expect(
            ReaderDriverFacts.pn533Check(boundInterfaces: [], acr122uAttached: true, moduleLoaded: false).status == .ok)
        #expect(
            ReaderDriverFacts.pn533Check(boundInterfaces: [], acr122uAttached: false, moduleLoaded: true).status == .ok)
    }
}
