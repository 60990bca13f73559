/// What the person at the reader is told after a tap.
public enum FeedbackOutcome: String, Sendable, Equatable, CaseIterable {
    /// The scan is committed to the spool as pending: a Plings identifier.
    case accepted
    /// The read completed but is not a Plings tag (blank, another URL, no NDEF): spooled as unrecognized.
    case unrecognized
    /// The read failed (card left mid-read, garbage, a phone) or the spool refused it: nothing accepted.
    case failed
}

/// One feedback pattern: an LED colour blinked together with `beeps` beeps of `milliseconds` each.
///
/// Written in the config as `"<led> <beeps>x<ms>"`, e.g. `"green 1x100"`, `"red 3x100"`, or `"off"` for no
/// feedback on that outcome. The LED is `green`, `red`, `orange` (both) or `none`; beeps 0...9; ms 100...2500 in
/// steps of 100 (the ACR122U blink unit is 100 ms).
public struct FeedbackPattern: Sendable, Equatable, CustomStringConvertible {
    public enum LED: String, Sendable, Equatable, CaseIterable {
        case green, red, orange, none
    }

    public var led: LED
    public var beeps: Int
    public var milliseconds: Int

    public init(led: LED, beeps: Int, milliseconds: Int) {
        self.led = led
        self.beeps = beeps
        self.milliseconds = milliseconds
    }

    /// No LED and no beep: nothing is sent.
    public static let off = FeedbackPattern(led: .none, beeps: 0, milliseconds: 100)

    public var isOff: Bool { led == .none && beeps == 0 }

    public var description: String { isOff ? "off" : "\(led.rawValue) \(beeps)x\(milliseconds)" }

    /// Parses `"green 1x100"` or `"off"`; the error says what is wrong.
    public static func parse(_ text: String) -> Result<FeedbackPattern, ConfigError> {
        let words = text.split(separator: " ").map(String.init)
        if words == ["off"] { return .success(.off) }
        let expected = "expected \"<green|red|orange|none> <beeps>x<ms>\" or \"off\", got \"\(text.prefix(40))\""
        guard words.count == 2, let led = LED(rawValue: words[0]) else { return .failure(ConfigError(expected)) }
        let parts = words[1].split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let beeps = Int(parts[0]), let ms = Int(parts[1]) else {
            return .failure(ConfigError(expected))
        }
        guard (0...9).contains(beeps) else { return .failure(ConfigError("beeps must be 0...9, got \(beeps)")) }
        guard (100...2500).contains(ms), ms % 100 == 0 else {
            return .failure(ConfigError("the duration must be 100...2500 ms in steps of 100, got \(ms)"))
        }
        return .success(FeedbackPattern(led: led, beeps: beeps, milliseconds: ms))
    }
}

/// Reader commands for feedback and for silencing the detect beep, from the ACS manuals. Pure: `FeedbackRunner`
/// sends them through a `ReaderControlChannel`.
public enum ReaderCommands {
    /// ACR122U "Bi-Color LED and Buzzer Control": `FF 00 40 P2 04 T1 T2 N B`.
    ///
    /// P2 bits (manual): 0 final red, 1 final green, 2 red state mask, 3 green state mask, 4 initial red blinking
    /// state, 5 initial green blinking state, 6 red blinking mask, 7 green blinking mask. The pattern blinks the
    /// LED(s) starting "on" and leaves the final state alone (masks 2-3 clear); T1 = T2 = the beep length in
    /// 100 ms units; N = the repetitions (at least 1, or nothing blinks); B = 01 (buzzer during T1) when beeping,
    /// 00 (LED only) otherwise; P2 = 00 with B = 01 is buzzer only. Nil for an `off` pattern.
    public static func acr122uLEDBuzzer(_ pattern: FeedbackPattern) -> [UInt8]? {
        guard !pattern.isOff else { return nil }
        let p2: UInt8
        switch pattern.led {
        case .green: p2 = 0x80 | 0x20
        case .red: p2 = 0x40 | 0x10
        case .orange: p2 = 0x80 | 0x40 | 0x20 | 0x10
        case .none: p2 = 0x00
        }
        let t = UInt8(pattern.milliseconds / 100)
        return [0xFF, 0x00, 0x40, p2, 0x04, t, t, UInt8(max(1, pattern.beeps)), pattern.beeps > 0 ? 0x01 : 0x00]
    }

    /// ACR122U "Set the buzzer output during card detection", off: `FF 00 52 00 00`.
    public static let acr122uDetectBeepOff: [UInt8] = [0xFF, 0x00, 0x52, 0x00, 0x00]

    /// ACR1252U family "LED Control": `E0 00 00 29 01 ss` (bit 0 red, bit 1 green).
    public static func acr1252uLED(_ led: FeedbackPattern.LED) -> [UInt8] {
        let bits: UInt8
        switch led {
        case .green: bits = 0x02
        case .red: bits = 0x01
        case .orange: bits = 0x03
        case .none: bits = 0x00
        }
        return acr1252uLED(bits: bits)
    }

    /// `E0 00 00 29 01 ss` with raw bits (to restore what `acr1252uLEDStatus` read).
    public static func acr1252uLED(bits: UInt8) -> [UInt8] { [0xE0, 0x00, 0x00, 0x29, 0x01, bits] }

    /// ACR1252U family "LED Status": `E0 00 00 29 00`.
    public static let acr1252uLEDStatus: [UInt8] = [0xE0, 0x00, 0x00, 0x29, 0x00]

    /// ACR1252U family "Buzzer Control": `E0 00 00 28 01 dd`, dd in 10 ms units (01...FF).
    public static func acr1252uBuzzer(milliseconds: Int) -> [UInt8] {
        [0xE0, 0x00, 0x00, 0x28, 0x01, UInt8(max(1, min(255, milliseconds / 10)))]
    }

    /// ACR1252U family "Read LED and Buzzer Status Indicator Behavior": `E0 00 00 21 00`.
    public static let acr1252uReadBehaviour: [UInt8] = [0xE0, 0x00, 0x00, 0x21, 0x00]

    /// "Set LED and Buzzer Status Indicator Behavior": `E0 00 00 21 01 bb`.
    public static func acr1252uSetBehaviour(_ behaviour: UInt8) -> [UInt8] {
        [0xE0, 0x00, 0x00, 0x21, 0x01, behaviour]
    }

    /// Bit 3 of the behaviour byte: "Card Insertion and Removal Events Buzzer".
    public static let acr1252uInsertionBeepBit: UInt8 = 0x08

    /// The one data byte of an escape answer `E1 00 00 00 01 xx`, nil for anything else.
    public static func escapeResult(_ reply: [UInt8]) -> UInt8? {
        guard reply.count == 6, reply[0] == 0xE1, reply[1] == 0, reply[2] == 0, reply[3] == 0, reply[4] == 1 else {
            return nil
        }
        return reply[5]
    }

    /// pcsc-lite's `SCARD_CTL_CODE(code)` (0x42000000 + code).
    public static func scardCtlCode(_ code: UInt32) -> UInt32 { 0x4200_0000 + code }

    /// The escape control codes tried in order: ACS's acsccid driver (`SCARD_CTL_CODE(3500)`), then libccid
    /// (`SCARD_CTL_CODE(1)`, refused unless `ifdDriverOptions` has bit 0x01).
    public static let escapeControlCodes: [UInt32] = [scardCtlCode(3500), scardCtlCode(1)]
}

/// The reader end of feedback: `SCardTransmit` to the tag (pseudo-APDUs) and `SCardControl` to the reader
/// (escapes). The PC/SC implementation lives in the NFC module; tests use a recording fake.
public protocol ReaderControlChannel {
    /// Sends a (pseudo-)APDU to the card on the reader; the raw reply with SW1 SW2.
    mutating func transmit(_ apdu: [UInt8]) throws(CardTransportError) -> [UInt8]
    /// Sends an escape command with `SCardControl(code)`; the raw reply.
    mutating func control(code: UInt32, _ command: [UInt8]) throws(CardTransportError) -> [UInt8]
    /// Waits `milliseconds` (between beeps on readers whose buzzer command does not repeat).
    mutating func pause(milliseconds: Int)
}

/// What became of one feedback or detect-beep command sequence.
public enum FeedbackDelivery: Sendable, Equatable {
    /// Sent and acknowledged.
    case sent
    /// Nothing to send (the pattern is `off`, or the profile has no feedback).
    case skipped
    /// The tag had left (the ACR122U command needs it present).
    case tagGone
    /// The reader refused or failed the command; the reason in one line.
    case refused(String)
}

/// Sends feedback and detect-beep commands through a channel; remembers which escape control code worked.
public struct FeedbackRunner: Sendable {
    /// The control code that worked last, tried first next time.
    public private(set) var workingControlCode: UInt32?

    public init() {}

    /// Sends `pattern` the way `profile` does it.
    public mutating func send(
        _ pattern: FeedbackPattern, profile: ReaderProfile, channel: inout some ReaderControlChannel
    ) -> FeedbackDelivery {
        guard !pattern.isOff, let method = profile.feedback else { return .skipped }
        switch method {
        case .ledBuzzerAPDU:
            guard let apdu = ReaderCommands.acr122uLEDBuzzer(pattern) else { return .skipped }
            return transmit(apdu, channel: &channel)
        case .escape:
            // Remember the LED state, show the colour, beep, then put the LED back.
            let previous = (try? escape(ReaderCommands.acr1252uLEDStatus, channel: &channel)).flatMap {
                ReaderCommands.escapeResult($0)
            }
            if pattern.led != .none {
                if case let failure? = expectEscape(ReaderCommands.acr1252uLED(pattern.led), channel: &channel) {
                    return failure
                }
            }
            for beep in 0..<pattern.beeps {
                if beep > 0 { channel.pause(milliseconds: pattern.milliseconds) }
                let command = ReaderCommands.acr1252uBuzzer(milliseconds: pattern.milliseconds)
                if case let failure? = expectEscape(command, channel: &channel) { return failure }
                channel.pause(milliseconds: pattern.milliseconds)
            }
            if pattern.led != .none, let previous {
                channel.pause(milliseconds: pattern.milliseconds)
                _ = expectEscape(ReaderCommands.acr1252uLED(bits: previous), channel: &channel)
            }
            return .sent
        }
    }

    /// Turns the detect beep off: ACR122U `FF 00 52 00 00`; ACR1252U family: read the behaviour byte and write
    /// it back with bit 3 (insertion/removal beep) cleared, other bits kept. `.skipped` when already silent or
    /// the profile cannot.
    public mutating func silenceDetectBeep(
        profile: ReaderProfile, channel: inout some ReaderControlChannel
    ) -> FeedbackDelivery {
        switch profile {
        case .acr122u:
            return transmit(ReaderCommands.acr122uDetectBeepOff, channel: &channel)
        case .acr1252u:
            let reply: [UInt8]
            do throws(CardTransportError) {
                reply = try escape(ReaderCommands.acr1252uReadBehaviour, channel: &channel)
            } catch {
                return .refused(error.description)
            }
            guard let behaviour = ReaderCommands.escapeResult(reply) else {
                return .refused("behaviour read answered " + NFCHex.bytes(reply.prefix(16)))
            }
            guard behaviour & ReaderCommands.acr1252uInsertionBeepBit != 0 else { return .skipped }
            let command = ReaderCommands.acr1252uSetBehaviour(behaviour & ~ReaderCommands.acr1252uInsertionBeepBit)
            return expectEscape(command, channel: &channel) ?? .sent
        case .omnikey, .acr1552u, .identiv, .plain:
            return .skipped
        }
    }

    /// A pseudo-APDU whose success is SW1 = 90 (the ACR122U LED command answers 90 + the LED state).
    private func transmit(_ apdu: [UInt8], channel: inout some ReaderControlChannel) -> FeedbackDelivery {
        do throws(CardTransportError) {
            let reply = try channel.transmit(apdu)
            guard reply.count >= 2 else { return .tagGone }
            guard reply[reply.count - 2] == 0x90 else {
                return .refused("reader answered \(NFCHex.bytes(reply.suffix(2))) to \(NFCHex.bytes(apdu.prefix(4)))")
            }
            return .sent
        } catch {
            if case .cardRemoved = error { return .tagGone }
            return .refused(error.description)
        }
    }

    /// An escape that must answer `E1 00 00 00 01 xx`; nil when it did.
    private mutating func expectEscape(
        _ command: [UInt8], channel: inout some ReaderControlChannel
    ) -> FeedbackDelivery? {
        do throws(CardTransportError) {
            let reply = try escape(command, channel: &channel)
            guard ReaderCommands.escapeResult(reply) != nil else {
                return .refused("escape \(NFCHex.bytes(command.prefix(4))) answered \(NFCHex.bytes(reply.prefix(16)))")
            }
            return nil
        } catch {
            return .refused(error.description)
        }
    }

    /// Sends an escape with the control code that worked before, else each known code in turn.
    private mutating func escape(
        _ command: [UInt8], channel: inout some ReaderControlChannel
    ) throws(CardTransportError) -> [UInt8] {
        let codes = workingControlCode.map { [$0] } ?? ReaderCommands.escapeControlCodes
        var last = CardTransportError.failed("no control code")
        for code in codes {
            do throws(CardTransportError) {
                let reply = try channel.control(code: code, command)
                workingControlCode = code
                return reply
            } catch {
                last = error
            }
        }
        throw last
    }
}
