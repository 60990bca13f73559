import Platform
import Udev

/// The evdev nodes of the `input` subsystem as `InputDeviceInfo`, through the shared `Udev` module: enumeration
/// and the hot-plug monitor.
///
/// libudev objects are not thread-safe: one `InputUdev` belongs to one thread (the reader loop, or the caller of
/// `HIDSource.scan`). Nothing here filters on "is initialized": under umockdev no device is, and on a real system
/// the properties we read are there by the time the node exists.
final class InputUdev {
    private let context: UdevContext
    /// The product name lives on the `inputN` parent, as its `name` attribute and `NAME` property.
    private static let parents = ["input": ["name", "NAME"]]

    init() throws(SystemError) { context = try UdevContext() }

    /// Every evdev node (`/dev/input/event*`) of the `input` subsystem, keyboards or not; callers look at
    /// `isKeyboard`. Devices without a devnode (the `inputN` parents) are skipped.
    func inputDevices() -> [InputDeviceInfo] {
        context.devices(subsystem: "input", sysname: "event*", parents: Self.parents).compactMap(Self.info)
    }

    /// The facts about an event node, or nil when it is not one (no devnode, not `event*`).
    static func info(_ device: UdevDevice) -> InputDeviceInfo? {
        guard let devnode = device.devnode, device.sysname.hasPrefix("event") else { return nil }
        let input = device.parents["input"] ?? [:]
        var name = input["name"] ?? input["NAME"].map { $0.trimmingCharacters(in: "\"") }
        if name?.isEmpty ?? true { name = device["ID_MODEL"].map { $0.replacingOccurrences(of: "_", with: " ") } }
        // The USB device carries idVendor/idProduct when udev's properties are missing.
        return InputDeviceInfo(
            devnode: devnode, syspath: device.syspath, name: name ?? device.sysname,
            vendor: device["ID_VENDOR_ID"] ?? device.usb["idVendor"],
            model: device["ID_MODEL_ID"] ?? device.usb["idProduct"],
            serial: device["ID_SERIAL"], serialShort: device["ID_SERIAL_SHORT"], path: device["ID_PATH"],
            tagged: device["PLINGS_SCANNER"] == "1", isKeyboard: device["ID_INPUT_KEYBOARD"] == "1")
    }

    /// A hot-plug monitor on the `input` subsystem.
    func monitor() throws(SystemError) -> InputMonitor {
        InputMonitor(try context.monitor(subsystem: "input", parents: Self.parents))
    }
}

/// One hot-plug notification.
struct HotplugEvent {
    enum Action: Equatable {
        case add
        case remove
        case other(String)
    }
    var action: Action
    /// Present for event nodes; nil for the `inputN` parents and other devices.
    var info: InputDeviceInfo?
    var syspath: String
    var devnode: String?
}

/// The `input` hot-plug monitor: its fd goes into the reader's `poll()` set.
final class InputMonitor {
    private let monitor: UdevDeviceMonitor

    init(_ monitor: UdevDeviceMonitor) { self.monitor = monitor }

    var fd: Int32 { monitor.fd }

    /// The events ready now.
    func receive() -> [HotplugEvent] {
        monitor.receive().map { event in
            HotplugEvent(
                action: event.action == "add" ? .add : event.action == "remove" ? .remove : .other(event.action),
                info: InputUdev.info(event.device), syspath: event.device.syspath, devnode: event.device.devnode)
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(in character: Character) -> String {
        var text = Substring(self)
        while text.first == character { text.removeFirst() }
        while text.last == character { text.removeLast() }
        return String(text)
    }
}
