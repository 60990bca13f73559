import BridgeCore
import Glibc
import Platform
import SourceKit

/// One candidate device as `plings-bridge scanners` reports it (docs/contracts.md, "Command line").
public struct ScannerInfo: Sendable, Equatable {
    public var devnode: String
    /// Product name.
    public var name: String
    /// The name reads from it carry (its `hid.match` rule's `name`, else `ID_SERIAL` when unique among scanners,
    /// else `ID_PATH`); nil when it is not a scanner.
    public var stableName: String?
    public var vendor: String?
    public var model: String?
    public var serial: String?
    public var path: String?
    public var matched: Bool
    public var reason: String
    /// The layout its lines are decoded with (scanners only).
    public var layout: String?
    public var openable: Bool
    /// Open, grab and release all worked (tried on scanners only: grabbing someone's keyboard, even for a
    /// moment, could swallow the release of the Enter that started this command).
    public var grabbable: Bool
    /// Why opening or grabbing failed, when it did.
    public var problem: String?

    /// As `plings-bridge scanners` lists it (`transport` `keyboard`: a keyboard-wedge scanner).
    public var listing: DeviceListing {
        DeviceListing(
            transport: "keyboard", devnode: devnode, product: name, vendor: vendor, model: model, serial: serial,
            path: path, matched: matched, reason: reason, stableName: stableName, layout: layout, openable: openable,
            grabbable: grabbable, problem: problem)
    }
}

extension HIDSource {
    /// Every keyboard udev knows, with whether it is a scanner and why, and whether it can be opened and
    /// grabbed now (a scanner grabbed by a running service reports "grabbed by another process").
    /// Safe to call while a `HIDSource` runs: it uses its own udev context.
    public static func scan(config: BridgeConfig.HID) -> [ScannerInfo] {
        guard let udev = try? InputUdev() else { return [] }
        let keyboards = ScannerMatcher.verdicts(for: udev.inputDevices(), rules: config.match)
        let names = ScannerMatcher.stableNames(keyboards.filter(\.verdict.matched).map(\.device))
        var result: [ScannerInfo] = []
        for (device, verdict) in keyboards {
            var info = ScannerInfo(
                devnode: device.devnode, name: device.name,
                stableName: verdict.matched ? verdict.name ?? names[device.devnode] : nil,
                vendor: device.vendor, model: device.model, serial: device.serial, path: device.path,
                matched: verdict.matched, reason: verdict.reason,
                layout: verdict.matched ? layoutName(config, verdict.layout, verdict.variant) : nil, openable: false,
                grabbable: false,
                problem: nil)
            probe(&info, tryGrab: verdict.matched)
            result.append(info)
        }
        return result
    }

    private static func probe(_ info: inout ScannerInfo, tryGrab: Bool) {
        let node: FileDescriptor
        do {
            node = try EvdevNode.open(info.devnode)
        } catch {
            info.problem =
                error.errno == EACCES
                ? "\(error.description): is the udev rule installed and this user in group plings?"
                : error.description
            return
        }
        info.openable = true
        guard tryGrab else { return }
        if let keys = try? EvdevNode.heldKeys(node.rawValue), keys.contains(where: { $0 != 0 }) {
            info.problem = "a key is held: grab not tried"
            return
        }
        do {
            try EvdevNode.grab(node.rawValue, true)
            info.grabbable = true
            try? EvdevNode.grab(node.rawValue, false)
        } catch  where error.errno == EBUSY {
            info.problem = "grabbed by another process (a running plings-bridge?): \(error.description)"
        } catch {
            info.problem = error.description
        }
    }
}

extension HIDSource {
    /// The layout and variant a scanner uses: its `hid.match` rule's layout (with that rule's variant), else
    /// `hid.layout` with the rule's variant or `hid.variant`.
    static func layoutChoice(
        _ config: BridgeConfig.HID, _ ruleLayout: String?, _ ruleVariant: String?
    ) -> (layout: String, variant: String?) {
        if let ruleLayout { return (ruleLayout, ruleVariant) }
        return (config.layout, ruleVariant ?? config.variant)
    }

    /// The canonical name (`gb`, `de(nodeadkeys)`) of what `layoutChoice` picks, as `scanners` shows it.
    static func layoutName(_ config: BridgeConfig.HID, _ ruleLayout: String?, _ ruleVariant: String?) -> String {
        let (layout, variant) = layoutChoice(config, ruleLayout, ruleVariant)
        return (try? XKBLayouts.validate(layout: layout, variant: variant)) ?? layout
    }

    /// A layout that types nothing: only if even `us` cannot be compiled (xkb-data missing).
    static let emptyLayout = KeyboardLayout(
        name: "none", displayName: "none", table: [UInt32](repeating: 0, count: KeyboardLayout.codeCount * 32),
        modifierRoles: [UInt8](repeating: 0, count: 8), compose: .empty, isISO: false)
}
