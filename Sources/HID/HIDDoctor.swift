import BridgeCore

/// `doctor`'s scanner finding: the scanners udev shows and whether each can be opened and grabbed now. The HID
/// module contributes it so `Doctor` knows no udev or evdev.
public enum HIDDoctor {
    public static func check(config: BridgeConfig.HID) -> DoctorCheck {
        guard config.enabled else { return DoctorCheck("scanners", .skip, "HID scanners disabled") }
        let scanners = HIDSource.scan(config: config).filter(\.matched)
        if scanners.isEmpty {
            return DoctorCheck(
                "scanners", .warn, "no barcode scanner found (none attached, or not recognised)",
                fix: "plug one in; `plings-bridge scanners` lists candidates and why they do not match (hid.match)")
        }
        let broken = scanners.filter { !$0.openable || !$0.grabbable }
        if let first = broken.first {
            return DoctorCheck(
                "scanners", .fail,
                "\(broken.count) of \(scanners.count) scanner(s) cannot be used: \(first.devnode): \(first.problem ?? "not openable or grabbable")",
                fix: "install the udev rule (group plings, mode 0660) and make sure no other program grabs the scanner")
        }
        return DoctorCheck(
            "scanners", .ok, "\(scanners.count) scanner(s): " + scanners.map(\.devnode).joined(separator: ", "))
    }
}
