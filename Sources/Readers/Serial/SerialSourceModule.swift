import BridgeCore
import Logging
import Platform
import SourceKit

extension SerialConfig: SourceSection {}

extension ReadSourceModule {
    /// Serial barcode scanners (`serial` section): ttys named by `serial.match`, read in raw mode, framed by suffix.
    public static let serial = ReadSourceModule(
        kind: .serial, devices: "the serial barcode scanners", section: \.serial,
        make: { context in
            SerialSource(
                config: context.config.serial, logger: context.logger, submit: context.submit,
                stateChanged: context.stateChanged)
        },
        doctor: { config, _ in [SerialDoctor.check(config: config.serial)] },
        listDevices: { config in SerialSource.scan(config: config.serial).map(\.listing) })
}

/// `doctor`'s serial check, read-only: which ttys `serial.match` names, and whether this user may open them. It
/// never opens a port (the service may hold it exclusively, and opening a modem's port can reset it).
enum SerialDoctor {
    static func check(config: SerialConfig) -> DoctorCheck {
        guard config.enabled else { return DoctorCheck("serial", .skip, "serial scanners disabled") }
        guard !config.match.isEmpty else {
            return DoctorCheck(
                "serial", .skip, "no serial.match rule: no serial port is read",
                fix: "for a scanner in USB COM port mode, add a serial.match rule (docs/configuration.md)")
        }
        let matched = SerialSource.scan(config: config).filter(\.matched)
        guard !matched.isEmpty else {
            return DoctorCheck(
                "serial", .warn, "no serial port matches serial.match (none attached, or the rule names another)",
                fix: "plug the scanner in; udevadm info /dev/ttyACM0 shows the properties a rule can match")
        }
        // The service opens its ports read-only: reading is what it needs.
        let denied = matched.filter { !$0.openable }
        if let first = denied.first {
            return DoctorCheck(
                "serial", .fail,
                "\(denied.count) of \(matched.count) serial port(s) not readable by this user: \(first.port.devnode)",
                fix: "install the udev rule (group plings, mode 0660), or run doctor as the service's user")
        }
        // Another program with the port open takes the bytes the bridge should read (the running service itself
        // holds it: that is as it should be).
        for listing in matched {
            let others = ProcessTable.holders(of: listing.port.devnode).filter { $0.name != "plings-bridge" }
            if let other = others.first {
                return DoctorCheck(
                    "serial", .fail, "\(listing.port.devnode) is held by \(other.name) (pid \(other.pid))",
                    fix: other.name == "ModemManager"
                        ? "the udev rule's ID_MM_DEVICE_IGNORE=1 must cover this scanner's vendor; re-plug it"
                        : "close that program; the service opens the port exclusively")
            }
        }
        if !ProcessTable.running("ModemManager").isEmpty,
            let probed = matched.first(where: { !$0.port.modemManagerIgnores })
        {
            return DoctorCheck(
                "serial", .warn,
                "ModemManager runs and may probe \(probed.port.devnode) with AT commands (no ID_MM_DEVICE_IGNORE)",
                fix: "add the scanner's idVendor to the tty line of the udev rule (docs/operations.md), or stop "
                    + "ModemManager")
        }
        return DoctorCheck(
            "serial", .ok, "\(matched.count) serial port(s): " + matched.map(\.port.devnode).joined(separator: ", "))
    }
}
