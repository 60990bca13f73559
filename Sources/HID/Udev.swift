import CUDev
import Foundation
import Glibc
import Platform

/// A libudev context: enumeration and the hot-plug monitor.
///
/// libudev objects are not thread-safe: one `Udev` belongs to one thread (the reader loop, or the caller of
/// `HIDSource.scan`). Nothing here filters on "is initialized": under umockdev no device is, and on a
/// real system the properties we read are there by the time the node exists.
final class Udev {
    private let context: OpaquePointer

    init() throws(SystemError) {
        guard let context = udev_new() else { throw SystemError("udev_new", errno: Glibc.errno) }
        self.context = context
    }

    deinit { udev_unref(context) }

    /// Every evdev node (`/dev/input/event*`) of the `input` subsystem, keyboards or not; callers look at
    /// `isKeyboard`. Devices without a devnode (the `inputN` parents) are skipped.
    func inputDevices() -> [InputDeviceInfo] {
        guard let enumerator = udev_enumerate_new(context) else { return [] }
        defer { udev_enumerate_unref(enumerator) }
        udev_enumerate_add_match_subsystem(enumerator, "input")
        udev_enumerate_add_match_sysname(enumerator, "event*")
        udev_enumerate_scan_devices(enumerator)
        var devices: [InputDeviceInfo] = []
        var entry = udev_enumerate_get_list_entry(enumerator)
        while let current = entry {
            if let syspath = udev_list_entry_get_name(current),
                let device = udev_device_new_from_syspath(context, syspath)
            {
                if let info = Self.info(device) { devices.append(info) }
                udev_device_unref(device)
            }
            entry = udev_list_entry_get_next(current)
        }
        return devices.sorted { $0.devnode < $1.devnode }
    }

    /// The facts about an event node, or nil when it is not one (no devnode, not `event*`).
    static func info(_ device: OpaquePointer) -> InputDeviceInfo? {
        guard let devnode = string(udev_device_get_devnode(device)),
            let sysname = string(udev_device_get_sysname(device)), sysname.hasPrefix("event")
        else { return nil }
        let syspath = string(udev_device_get_syspath(device)) ?? ""
        func property(_ key: String) -> String? {
            guard let value = string(udev_device_get_property_value(device, key)), !value.isEmpty else { return nil }
            return value
        }
        // The USB device carries idVendor/idProduct when udev's properties are missing.
        let usb = udev_device_get_parent_with_subsystem_devtype(device, "usb", "usb_device")
        func usbAttribute(_ key: String) -> String? {
            guard let usb else { return nil }
            return string(udev_device_get_sysattr_value(usb, key))
        }
        // The product name lives on the `inputN` parent, as its `name` attribute and `NAME` property.
        var name: String?
        if let parent = udev_device_get_parent_with_subsystem_devtype(device, "input", nil) {
            name = string(udev_device_get_sysattr_value(parent, "name"))
            if name == nil || name?.isEmpty == true {
                name = string(udev_device_get_property_value(parent, "NAME"))?
                    .trimmingCharacters(in: "\"")
            }
        }
        if name == nil || name?.isEmpty == true {
            name = property("ID_MODEL").map { $0.replacingOccurrences(of: "_", with: " ") }
        }
        return InputDeviceInfo(
            devnode: devnode, syspath: syspath, name: name ?? sysname,
            vendor: property("ID_VENDOR_ID") ?? usbAttribute("idVendor"),
            model: property("ID_MODEL_ID") ?? usbAttribute("idProduct"),
            serial: property("ID_SERIAL"), serialShort: property("ID_SERIAL_SHORT"), path: property("ID_PATH"),
            tagged: property("PLINGS_SCANNER") == "1", isKeyboard: property("ID_INPUT_KEYBOARD") == "1")
    }

    static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    /// A hot-plug monitor on the `input` subsystem (events after udev processed them, "udev" source).
    func monitor() throws(SystemError) -> UdevMonitor {
        guard let monitor = udev_monitor_new_from_netlink(context, "udev") else {
            throw SystemError("udev_monitor_new_from_netlink", errno: Glibc.errno)
        }
        let status = udev_monitor_filter_add_match_subsystem_devtype(monitor, "input", nil)
        if status < 0 {
            udev_monitor_unref(monitor)
            throw SystemError("udev_monitor_filter_add_match_subsystem_devtype", errno: -status)
        }
        let enabled = udev_monitor_enable_receiving(monitor)
        if enabled < 0 {
            udev_monitor_unref(monitor)
            throw SystemError("udev_monitor_enable_receiving", errno: -enabled)
        }
        return UdevMonitor(monitor)
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

/// The udev monitor: its fd goes into the reader's `poll()` set.
final class UdevMonitor {
    private let monitor: OpaquePointer

    init(_ monitor: OpaquePointer) { self.monitor = monitor }

    deinit { udev_monitor_unref(monitor) }

    var fd: Int32 { udev_monitor_get_fd(monitor) }

    /// The events ready now (the fd is non-blocking: nil from libudev means "drained").
    func receive() -> [HotplugEvent] {
        var events: [HotplugEvent] = []
        while let device = udev_monitor_receive_device(monitor) {
            let action = Udev.string(udev_device_get_action(device)) ?? ""
            let event = HotplugEvent(
                action: action == "add" ? .add : action == "remove" ? .remove : .other(action),
                info: Udev.info(device), syspath: Udev.string(udev_device_get_syspath(device)) ?? "",
                devnode: Udev.string(udev_device_get_devnode(device)))
            udev_device_unref(device)
            events.append(event)
            if events.count >= 64 { break }
        }
        return events
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
