import BridgeCore
import Glibc
import Logging
import SourceKit
import Udev

extension HIDPOSConfig: SourceSection {}

extension ReadSourceModule {
    /// Barcode scanners in HID POS mode (`hidpos` section): hidraw nodes chosen by their report descriptor, with
    /// the scanner's own beeper as feedback after the commit.
    public static let hidpos = ReadSourceModule(
        kind: .hidpos, devices: "the HID POS barcode scanners", section: \.hidpos,
        alsoRestartsWhen: { $0.hosts != $1.hosts },
        make: { context in
            HIDPOSSource(
                config: context.config.hidpos, hosts: context.config.hosts, logger: context.logger,
                commit: context.committer, stateChanged: context.stateChanged)
        },
        doctor: { config, _ in [HIDPOSDoctor.check(config: config.hidpos)] },
        listDevices: { config in HIDPOSSource.scan(config: config.hidpos).map(\.listing) })
}

/// `doctor`'s HID POS check, read-only: which hidraw nodes are HID POS scanners (by descriptor, from sysfs), and
/// whether this user may open them. It never opens a node: the running service reads them.
enum HIDPOSDoctor {
    static func check(config: HIDPOSConfig) -> DoctorCheck {
        guard config.enabled else { return DoctorCheck("hidpos", .skip, "HID POS scanners disabled") }
        let listings = HIDPOSSource.scan(config: config)
        let scanners = listings.filter { $0.layout != nil }
        let matched = scanners.filter(\.matched)
        guard !matched.isEmpty else {
            if !scanners.isEmpty {
                return DoctorCheck(
                    "hidpos", .warn, "\(scanners.count) HID POS scanner(s), none named by hidpos.match",
                    fix: "plings-bridge scanners shows each one's vendor, model and serial for a rule")
            }
            return DoctorCheck(
                "hidpos", .skip, "no HID POS scanner attached (a scanner in keyboard mode is the hid check's)")
        }
        let mode = config.feedback == .none ? "read" : "read and write"
        let denied = matched.filter { !$0.openable }
        if let first = denied.first {
            return DoctorCheck(
                "hidpos", .fail,
                "\(denied.count) of \(matched.count) HID POS scanner(s) not open to this user for \(mode): "
                    + first.device.devnode,
                fix: "install the package's udev rule (group plings), or run doctor as the service's user")
        }
        if let both = matched.first(where: { keyboardInterfaces().contains($0.device.usbSyspath ?? "-") }) {
            return DoctorCheck(
                "hidpos", .warn,
                "\(both.device.stableName) (\(both.device.devnode)) is also a keyboard: its codes may be typed as well",
                fix: "set the scanner to HID POS only (its manual's \"USB HID POS\" code), so each code is read once")
        }
        return DoctorCheck(
            "hidpos", .ok,
            "\(matched.count) HID POS scanner(s): "
                + matched.map { "\($0.device.devnode) (\($0.device.stableName))" }.joined(separator: ", "))
    }

    /// The USB devices that have a keyboard interface (udev's `ID_INPUT_KEYBOARD` on an event node).
    static func keyboardInterfaces() -> Set<String> {
        guard let udev = try? UdevContext() else { return [] }
        return Set(
            udev.devices(subsystem: "input", sysname: "event*").filter { $0["ID_INPUT_KEYBOARD"] == "1" }
                .compactMap(\.usbSyspath))
    }
}
