import BridgeCore
import Glibc

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

    /// With `hid.passThrough` on: whether `/dev/uinput` is there and this user may write it (the virtual keyboard
    /// codes are re-typed on); nil when pass-through is off.
    public static func passThroughCheck(config: BridgeConfig.HID, uinput: String = "/dev/uinput") -> DoctorCheck? {
        guard config.enabled, config.passThrough != .none else { return nil }
        let what = "hid.passThrough is \(config.passThrough.rawValue)"
        guard access(uinput, F_OK) == 0 else {
            return DoctorCheck(
                "pass-through", .fail, "\(what) but \(uinput) is missing: codes go to plings-bridge only",
                fix: PassThroughKeyboard.fix(errno: ENOENT))
        }
        guard access(uinput, W_OK) == 0 else {
            return DoctorCheck(
                "pass-through", .fail, "\(what) but this user cannot write \(uinput): codes go to plings-bridge only",
                fix: PassThroughKeyboard.fix(errno: EACCES))
        }
        return DoctorCheck("pass-through", .ok, "\(what): codes are re-typed on a virtual keyboard (\(uinput))")
    }
}
