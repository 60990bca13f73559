/// The reader's firmware version, for `test-read`'s report (what a lab files with its results). Only the readers
/// whose manuals give a version command are asked, once per reader, after a read, never on the service's path.
public enum ReaderFirmware {
    /// ACR122U API manual, "Get the Firmware Version of the Reader": `FF 00 48 00 00`, answered with the version in
    /// ASCII (10 bytes, e.g. `ACR122U201`) and no status word.
    public static let acr122uCommand: [UInt8] = [0xFF, 0x00, 0x48, 0x00, 0x00]
    /// ACR1252U reference manual, "Get Firmware Version": the escape `E0 00 00 18 00`, answered
    /// `E1 00 00 00 <length> <ASCII>` (e.g. `ACR1252U_V202.2`).
    public static let acr1252uEscape: [UInt8] = [0xE0, 0x00, 0x00, 0x18, 0x00]

    /// Asks the reader through `channel`; nil when its profile has no version command or it gave no version.
    public static func query(profile: ReaderProfile, channel: inout some ReaderControlChannel) -> String? {
        switch profile {
        case .acr122u:
            guard let reply = try? channel.transmit(acr122uCommand) else { return nil }
            return acr122u(reply)
        case .acr1252u:
            for code in ReaderCommands.escapeControlCodes {
                if let reply = try? channel.control(code: code, acr1252uEscape), let version = escape(reply) {
                    return version
                }
            }
            return nil
        case .omnikey, .acr1552u, .identiv, .plain:
            return nil
        }
    }

    /// The ACR122U's answer: the text, with a trailing `90 00` taken off should a firmware add one.
    public static func acr122u(_ reply: [UInt8]) -> String? {
        var bytes = reply
        if bytes.count > 2, bytes.suffix(2) == [0x90, 0x00] { bytes.removeLast(2) }
        return text(bytes)
    }

    /// An ACS escape answer `E1 00 00 00 <length> <text>`.
    public static func escape(_ reply: [UInt8]) -> String? {
        guard reply.count > 5, reply[0] == 0xE1, reply[1] == 0, reply[2] == 0, reply[3] == 0,
            Int(reply[4]) == reply.count - 5
        else { return nil }
        return text(Array(reply[5...]))
    }

    /// Printable ASCII of 1 to 64 bytes; anything else (an error status such as `6A 81`) is not a version.
    static func text(_ bytes: [UInt8]) -> String? {
        guard (1...64).contains(bytes.count), bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
