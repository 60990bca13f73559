import BridgeCore

/// Decides which input devices are scanners and what each is called (pure: tested without udev).
public enum ScannerMatcher {
    /// The verdict on one device.
    public struct Verdict: Sendable, Equatable {
        public var matched: Bool
        /// Why it matched, or why not (shown by `plings-bridge scanners`).
        public var reason: String
        /// The layout of the `hid.match` rule that matched, if it names one.
        public var layout: String?
        /// The variant of the `hid.match` rule that matched, if it names one.
        public var variant: String? = nil
        /// The operator's name from the `hid.match` rule that matched, if it gives one: the scanner's name in place
        /// of its stable name.
        public var name: String? = nil
    }

    /// A device is a scanner when a `hid.match` rule matches it (checked first, so its `layout` applies even
    /// to a device our udev rule also tagged) or our udev rule tagged it with `PLINGS_SCANNER=1`.
    ///
    /// A rule with no criteria at all matches nothing: it would otherwise grab every keyboard, including the
    /// one an operator types on.
    public static func verdict(for device: InputDeviceInfo, rules: [BridgeConfig.HID.Match]) -> Verdict {
        guard device.isKeyboard else {
            return Verdict(matched: false, reason: "not a keyboard (no ID_INPUT_KEYBOARD)", layout: nil)
        }
        // Codes re-typed by hid.passThrough must reach the desktop, not come back as reads.
        guard device.name != PassThroughKeyboard.deviceName else {
            return Verdict(matched: false, reason: "plings-bridge's own pass-through keyboard", layout: nil)
        }
        for (index, rule) in rules.enumerated() where matches(rule, device) {
            var criteria: [String] = []
            if let vendor = rule.vendor { criteria.append("vendor=\(InputDeviceInfo.normalizeHexID(vendor))") }
            if let model = rule.model { criteria.append("model=\(InputDeviceInfo.normalizeHexID(model))") }
            if let serial = rule.serial { criteria.append("serial=\(serial)") }
            if let path = rule.path { criteria.append("path=\(path)") }
            return Verdict(
                matched: true, reason: "hid.match[\(index)] (\(criteria.joined(separator: " ")))", layout: rule.layout,
                variant: rule.variant, name: rule.name)
        }
        if device.tagged {
            return Verdict(matched: true, reason: "udev rule (PLINGS_SCANNER=1)", layout: nil)
        }
        let id = "\(device.vendor ?? "????"):\(device.model ?? "????")"
        return Verdict(
            matched: false,
            reason:
                "not a known scanner: \(id) has no PLINGS_SCANNER=1 from the udev rule and no hid.match rule matches",
            layout: nil)
    }

    /// Every keyboard among `devices`, in order, with its verdict (other devices are never scanners).
    public static func verdicts(
        for devices: [InputDeviceInfo], rules: [BridgeConfig.HID.Match]
    ) -> [(device: InputDeviceInfo, verdict: Verdict)] {
        devices.filter(\.isKeyboard).map { ($0, verdict(for: $0, rules: rules)) }
    }

    static func matches(_ rule: BridgeConfig.HID.Match, _ device: InputDeviceInfo) -> Bool {
        guard rule.vendor != nil || rule.model != nil || rule.serial != nil || rule.path != nil else { return false }
        if let vendor = rule.vendor, InputDeviceInfo.normalizeHexID(vendor) != device.vendor { return false }
        if let model = rule.model, InputDeviceInfo.normalizeHexID(model) != device.model { return false }
        // `serial` and `path` are shell-style patterns, as in hidpos.match and serial.match: a plain value matches
        // only itself (udev's serials and ID_PATHs hold no pattern characters), and `*-usb-0:3:1.0` names a port
        // on whatever controller.
        return ShellPattern.matches(rule.serial, device.serial, device.serialShort)
            && ShellPattern.matches(rule.path, device.path)
    }

    /// Stable names (docs/contracts.md, "Spool record") keyed by devnode: `ID_SERIAL` when no other scanner in
    /// `devices` has the same one (identical scanners often share a serial, or have none), else `ID_PATH`, else
    /// the devnode.
    public static func stableNames(_ devices: [InputDeviceInfo]) -> [String: String] {
        var serialCounts: [String: Int] = [:]
        for device in devices {
            if let serial = device.serial, !serial.isEmpty { serialCounts[serial, default: 0] += 1 }
        }
        var names: [String: String] = [:]
        for device in devices {
            names[device.devnode] = stableName(device, serialIsUnique: serialCounts[device.serial ?? ""] == 1)
        }
        return names
    }

    /// The stable name of `device` given whether its serial is unique among the scanners present.
    public static func stableName(_ device: InputDeviceInfo, serialIsUnique: Bool) -> String {
        if serialIsUnique, let serial = device.serial, !serial.isEmpty { return serial }
        if let path = device.path, !path.isEmpty { return path }
        return device.devnode
    }
}
