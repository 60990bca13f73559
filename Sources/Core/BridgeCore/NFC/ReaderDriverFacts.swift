/// What `doctor` concludes from the host's reader drivers: the kernel NFC stack holding an ACR122U, and
/// libccid refusing escape commands. Pure: the NFC module reads the files and passes their text in.
public enum ReaderDriverFacts {
    /// The ACR122U's USB vendor and product id (072f:2200).
    public static let acr122uUSBID = (vendor: "072f", product: "2200")

    /// `ifdDriverOptions` from libccid's `Info.plist` text: the `<string>` after the `<key>`; nil when absent
    /// or not a number (hex `0x...` or decimal).
    public static func ifdDriverOptions(plist: String) -> UInt32? {
        guard let key = plist.range(of: "<key>ifdDriverOptions</key>") else { return nil }
        let rest = plist[key.upperBound...]
        guard let open = rest.range(of: "<string>"), let close = rest.range(of: "</string>"),
            open.upperBound <= close.lowerBound
        else { return nil }
        let text = String(rest[open.upperBound..<close.lowerBound]).trimmingASCIIWhitespace()
        if text.lowercased().hasPrefix("0x") { return UInt32(text.dropFirst(2), radix: 16) }
        return UInt32(text)
    }

    /// libccid's DRIVER_OPTION_CCID_EXCHANGE_AUTHORIZED: escapes through `SCARD_CTL_CODE(1)` are allowed.
    public static let exchangeAuthorized: UInt32 = 0x01

    /// The doctor check for the kernel's pn533 driver: `boundInterfaces` are the USB interfaces bound to
    /// `pn533_usb` (entries like `1-1:1.0` in /sys/bus/usb/drivers/pn533_usb), `acr122uAttached` whether a
    /// 072f:2200 device is on the bus, `moduleLoaded` whether pn533/pn533_usb is in /proc/modules.
    public static func pn533Check(boundInterfaces: [String], acr122uAttached: Bool, moduleLoaded: Bool) -> DoctorCheck {
        let fix =
            "blacklist the kernel NFC driver: printf 'blacklist pn533_usb\\nblacklist pn533\\nblacklist nfc\\n' "
            + "> /etc/modprobe.d/blacklist-pn533.conf; then rmmod pn533_usb pn533 nfc (or reboot) and replug the reader"
        if !boundInterfaces.isEmpty {
            return DoctorCheck(
                "pn533", .fail,
                "the kernel's pn533_usb driver holds an NFC reader (\(boundInterfaces.joined(separator: ", "))): "
                    + "pcscd cannot use it", fix: fix)
        }
        if acr122uAttached && moduleLoaded {
            return DoctorCheck(
                "pn533", .warn, "pn533_usb is loaded with an ACR122U attached: it takes the reader when replugged",
                fix: fix)
        }
        return DoctorCheck(
            "pn533", .ok, moduleLoaded ? "pn533_usb loaded but holds no reader" : "kernel NFC driver (pn533) not loaded"
        )
    }

    /// The doctor check for escape commands: `readers` are the attached readers whose profile sends escapes
    /// (ACR1252U family) while feedback or detect-beep silencing is on; `acsccid` whether ACS's driver is
    /// installed (it answers `SCARD_CTL_CODE(3500)`); `libccidOptions` libccid's `ifdDriverOptions`.
    public static func escapeCheck(readers: [String], acsccid: Bool, libccidOptions: UInt32?, plistPath: String)
        -> DoctorCheck
    {
        guard !readers.isEmpty else {
            return DoctorCheck("reader escapes", .skip, "no attached reader needs escape commands")
        }
        let names = readers.joined(separator: ", ")
        if acsccid {
            return DoctorCheck("reader escapes", .ok, "ACS acsccid driver installed: escapes allowed for \(names)")
        }
        guard let options = libccidOptions else {
            return DoctorCheck(
                "reader escapes", .warn,
                "cannot read ifdDriverOptions from \(plistPath): feedback on \(names) may be refused",
                fix: "check that libccid is installed (apt-get install libccid)")
        }
        if options & exchangeAuthorized != 0 {
            return DoctorCheck(
                "reader escapes", .ok,
                "libccid allows escape commands (ifdDriverOptions 0x\(String(options, radix: 16)))")
        }
        return DoctorCheck(
            "reader escapes", .warn,
            "libccid refuses escape commands (ifdDriverOptions 0x\(String(options, radix: 16)), bit 0x01 clear): "
                + "no beep/LED feedback and no detect-beep silencing on \(names)",
            fix: "set ifdDriverOptions to 0x0001 in \(plistPath) and restart pcscd (or install ACS's acsccid driver)")
    }
}
