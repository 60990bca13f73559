import Testing

@testable import BridgeCore

// Expected bytes and answers are the ACS manuals' own examples: the ACR122U API manual, "Get the Firmware Version
// of the Reader" (FF 00 48 00 00 -> 41 43 52 31 32 32 55 32 30 31 = "ACR122U201", no status word), and the
// ACR1252U-family reference manuals, "Get Firmware Version" (escape E0 00 00 18 00 ->
// E1 00 00 00 0F 41 43 52 31 32 35 32 55 5F 56 32 30 32 2E 32 = "ACR1252U_V202.2").

/// A reader answering the version commands as its manual shows; `apduReply` and `escapeReply` replace them.
struct FirmwareChannel: ReaderControlChannel {
    var apduReply: [UInt8] = [0x41, 0x43, 0x52, 0x31, 0x32, 0x32, 0x55, 0x32, 0x30, 0x31]
    var escapeReply: [UInt8] = [
        0xE1, 0x00, 0x00, 0x00, 0x0F, 0x41, 0x43, 0x52, 0x31, 0x32, 0x35, 0x32, 0x55, 0x5F, 0x56, 0x32, 0x30, 0x32,
        0x2E, 0x32,
    ]
    var transmitted: [[UInt8]] = []
    var controls: [(code: UInt32, bytes: [UInt8])] = []

    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8] {
        transmitted.append(apdu)
        return apduReply
    }

    mutating func control(code: UInt32, _ command: [UInt8]) throws(CardTransportError) -> [UInt8] {
        controls.append((code, command))
        // acsccid's SCARD_CTL_CODE(3500) = 0x42000DAC.
        guard code == 0x4200_0DAC else { throw .failed("SCARD_E_UNSUPPORTED_FEATURE") }
        return escapeReply
    }

    mutating func pause(milliseconds: Int) {}
}

@Suite struct ReaderFirmwareTests {
    @Test func theACR122UAnswersItsVersionInASCII() {
        var channel = FirmwareChannel()
        #expect(ReaderFirmware.query(profile: .acr122u, channel: &channel) == "ACR122U201")
        #expect(channel.transmitted == [[0xFF, 0x00, 0x48, 0x00, 0x00]] && channel.controls.isEmpty)
        // A firmware that adds SW1 SW2 90 00 after the text; a reader that refuses the command (6A 81).
        channel.apduReply += [0x90, 0x00]
        #expect(ReaderFirmware.query(profile: .acr122u, channel: &channel) == "ACR122U201")
        channel.apduReply = [0x6A, 0x81]
        #expect(ReaderFirmware.query(profile: .acr122u, channel: &channel) == nil)
    }

    @Test func theACR1252UAnswersThroughAnEscape() {
        var channel = FirmwareChannel()
        #expect(ReaderFirmware.query(profile: .acr1252u, channel: &channel) == "ACR1252U_V202.2")
        #expect(channel.controls.first?.bytes == [0xE0, 0x00, 0x00, 0x18, 0x00] && channel.transmitted.isEmpty)
        // A length that does not match what follows is no answer.
        channel.escapeReply[4] = 0x10
        #expect(ReaderFirmware.query(profile: .acr1252u, channel: &channel) == nil)
    }

    @Test(arguments: [ReaderProfile.plain, .omnikey, .identiv])
    func readersWithoutAVersionCommandAreNotAsked(profile: ReaderProfile) {
        var channel = FirmwareChannel()
        #expect(ReaderFirmware.query(profile: profile, channel: &channel) == nil)
        #expect(channel.transmitted.isEmpty && channel.controls.isEmpty)
    }
}
