import BridgeCore
import CPCSCLite

/// `doctor`'s NFC findings: pcscd reachable (and polkit letting this user in), the readers `nfc.readers`
/// selects, and their drivers (`NFCDriverChecks`). The NFC module contributes them so `Doctor` knows no PC/SC.
public enum NFCDoctor {
    public static func checks(config: BridgeConfig.NFC) -> [DoctorCheck] {
        guard config.enabled else { return [DoctorCheck("pcscd", .skip, "NFC readers disabled")] }
        let listing = NFCReaders.list()
        if let problem = listing.problem {
            return [
                DoctorCheck(
                    "pcscd", .fail, problem,
                    fix: listing.error?.isAccessDenied ?? false
                        ? "install the polkit rule for group plings (udev/60-plings-bridge-pcsc.rules) and add the user to it"
                        : "install and start pcscd: apt-get install pcscd && systemctl enable --now pcscd.socket"),
                DoctorCheck("readers", .skip, "not checked: pcscd not reachable"),
            ]
        }
        let readers = listing.readers.filter { NFCSource.matches($0.name, patterns: config.readers) }
        let drivers = NFCDriverChecks.checks(readers: readers.map(\.name), config: config)
        let pcscd = DoctorCheck("pcscd", .ok, "pcscd reachable")
        if readers.isEmpty {
            return [
                pcscd,
                DoctorCheck(
                    "readers", .warn,
                    "no NFC reader attached" + (config.readers.isEmpty ? "" : " matching nfc.readers"),
                    fix:
                        "plug in a PC/SC reader (ACR122U: blacklist pn533/nfc, see docs/operations.md); `plings-bridge readers`"
                ),
            ] + drivers
        }
        return [
            pcscd,
            DoctorCheck("readers", .ok, "\(readers.count) reader(s): " + readers.map(\.name).joined(separator: ", ")),
            names(readers, config: config),
            iso15693(readers.map(\.name), rules: config.profiles),
        ] + drivers
    }

    /// What each selected reader is called and where it is plugged in; a warning when one name would cover two
    /// readers (an `nfc.names` rule that matches both: their reads could not be told apart).
    static func names(_ readers: [NFCReaderInfo], config: BridgeConfig.NFC) -> DoctorCheck {
        var byName: [String: [String]] = [:]
        let lines = readers.map { reader -> String in
            let name = config.name(of: reader.name, identity: reader.identity)
            byName[name, default: []].append(reader.name)
            let port = reader.identity.path.map { "USB port \($0)" } ?? "port unknown: \(reader.identity.note ?? "")"
            return (name == reader.name ? name : "\(name) = \(reader.name)") + " (\(port))"
        }
        let shared = byName.filter { $0.value.count > 1 }.sorted { $0.key < $1.key }
        if let (name, both) = shared.first {
            return DoctorCheck(
                "reader names", .warn,
                "\(both.count) readers are named '\(name)' (\(both.joined(separator: ", "))): their reads cannot be told apart",
                fix: "give each reader a rule of its own in nfc.names, by USB port (path) or serial")
        }
        return DoctorCheck("reader names", .ok, lines.joined(separator: "; "))
    }

    /// Which selected readers read ISO 15693 (Type 5) tags, by their profile. Not a fault: most gates never meet
    /// such a tag, so a reader that cannot is said plainly, not warned about.
    static func iso15693(_ names: [String], rules: [ReaderProfile.Rule]) -> DoctorCheck {
        let profiles = names.map { ($0, ReaderProfile.resolve(readerName: $0, rules: rules)) }
        let cannot = profiles.filter { !$0.1.readsISO15693 }.map { "\($0.0) (profile \($0.1))" }
        let can = profiles.filter { $0.1.readsISO15693 }.map(\.0)
        if can.isEmpty {
            return DoctorCheck(
                "iso15693", .skip, ReaderProfile.cannotReadISO15693 + ": " + cannot.joined(separator: ", "))
        }
        let rest = cannot.isEmpty ? "" : "; this reader cannot read ISO 15693: " + cannot.joined(separator: ", ")
        return DoctorCheck("iso15693", .ok, "ISO 15693 (Type 5) tags read by " + can.joined(separator: ", ") + rest)
    }
}

extension PCSCError {
    /// pcscd refused this user: pcsc-lite answers a client polkit does not authorise with
    /// `SCARD_W_SECURITY_VIOLATION` (docs/operations.md, "Let the service user use pcscd"); `SCARD_E_NO_ACCESS` is
    /// the header's other "access denied".
    var isAccessDenied: Bool { code == SCARD_W_SECURITY_VIOLATION || code == SCARD_E_NO_ACCESS }
}
