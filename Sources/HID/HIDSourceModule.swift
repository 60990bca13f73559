import BridgeCore
import Logging
import Plugins

extension SourceKind {
    /// Reads from keyboard-wedge barcode scanners.
    public static let hid = SourceKind("hid")
}

extension ReadSourceModule {
    /// Keyboard-wedge USB barcode scanners (`hid` section): found through udev, grabbed, decoded with xkb-data.
    public static let hid = ReadSourceModule(
        kind: .hid, devices: "the HID barcode scanners", configSection: HIDConfig.self, isEnabled: { $0.hid.enabled },
        debounce: { $0.hid.debounce },
        settingsChanged: { $0.hid != $1.hid || ($0.hid.passThrough != .none && $0.hosts != $1.hosts) },
        make: { context in
            HIDSource(
                config: context.config.hid, logger: context.logger, submit: context.submit,
                commit: context.committer, hosts: context.config.hosts, stateChanged: context.stateChanged)
        },
        doctor: { config, _ in
            [HIDDoctor.check(config: config.hid)] + [HIDDoctor.passThroughCheck(config: config.hid)].compactMap { $0 }
        },
        listDevices: { config in
            HIDSource.scan(config: config.hid).map { info in
                var lines = [
                    "\(info.devnode)  \(info.vendor ?? "????"):\(info.model ?? "????")  \(info.name)",
                    "    \(info.matched ? "scanner" : "ignored"): \(info.reason)",
                ]
                if let stable = info.stableName { lines.append("    name: \(stable)  layout: \(info.layout ?? "-")") }
                lines.append("    serial: \(info.serial ?? "-")  path: \(info.path ?? "-")")
                lines.append(
                    "    openable: \(info.openable ? "yes" : "no")  grabbable: \(info.grabbable ? "yes" : "no")"
                        + (info.problem.map { "  (\($0))" } ?? ""))
                return DeviceListing(json: info.json, lines: lines)
            }
        })
}
