import BridgeCore
import Logging
import SourceKit

extension SourceKind {
    /// Reads from keyboard-wedge barcode scanners.
    public static let hid = SourceKind("hid")
}

extension HIDConfig: SourceSection {}

extension ReadSourceModule {
    /// Keyboard-wedge USB barcode scanners (`hid` section): found through udev, grabbed, decoded with xkb-data.
    public static let hid = ReadSourceModule(
        kind: .hid, devices: "the HID barcode scanners", section: \.hid,
        // With pass-through on, `hosts` decides which codes it keeps and which it types on.
        alsoRestartsWhen: { $0.hid.passThrough != .none && $0.hosts != $1.hosts },
        make: { context in
            HIDSource(
                config: context.config.hid, logger: context.logger, submit: context.submit,
                commit: context.committer, hosts: context.config.hosts, stateChanged: context.stateChanged)
        },
        doctor: { config, _ in
            [HIDDoctor.check(config: config.hid)] + [HIDDoctor.passThroughCheck(config: config.hid)].compactMap { $0 }
        },
        listDevices: { config in HIDSource.scan(config: config.hid).map(\.listing) })
}
