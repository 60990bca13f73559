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
        settingsChanged: { $0.hid != $1.hid },
        make: { context in
            HIDSource(config: context.config.hid, logger: context.logger, submit: context.submit)
        },
        doctor: { config, _ in [HIDDoctor.check(config: config.hid)] })
}
