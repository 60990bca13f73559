import CUDev
import Glibc
import Platform

/// One device as udev describes it: its node, its properties and the identity of the USB device above it.
public struct UdevDevice: Sendable, Equatable {
    public var syspath: String
    public var sysname: String
    public var devnode: String?
    /// udev's properties (`ID_VENDOR_ID`, `ID_SERIAL`, `ID_PATH`...), empty values left out.
    public var properties: [String: String]
    /// The sysfs attributes of the USB device above it (`idVendor`, `idProduct`, `serial`, `product`), when there
    /// is one: they stand in for properties udev has not set (under umockdev nothing is "initialized").
    public var usb: [String: String]
    /// The sysfs path of that USB device: the interfaces of one scanner (a keyboard, a HID POS node, a tty) share it.
    public var usbSyspath: String?
    /// What the caller asked of the nearest parent of each subsystem (`devices(subsystem:parents:)`): each named
    /// sysfs attribute, else the property of that name; absent when empty. The name `syspath` gives the parent's
    /// sysfs path (to read a binary attribute such as a HID device's `report_descriptor`).
    public var parents: [String: [String: String]]

    public init(
        syspath: String, sysname: String, devnode: String?, properties: [String: String], usb: [String: String] = [:],
        parents: [String: [String: String]] = [:], usbSyspath: String? = nil
    ) {
        self.syspath = syspath
        self.sysname = sysname
        self.devnode = devnode
        self.properties = properties
        self.usb = usb
        self.usbSyspath = usbSyspath
        self.parents = parents
    }

    /// A property, or nil when absent or empty.
    public subscript(property: String) -> String? { properties[property] }
}

/// A libudev context: enumeration of one subsystem and its hot-plug monitor.
///
/// libudev objects are not thread-safe: a context belongs to the one thread that made it (a source's reader
/// thread, or a command's caller). Nothing here filters on "is initialized": under umockdev no device is, and on a
/// real system the properties are there by the time the node exists.
public final class UdevContext {
    private let context: OpaquePointer

    public init() throws(SystemError) {
        guard let context = udev_new() else { throw SystemError("udev_new", errno: Glibc.errno) }
        self.context = context
    }

    deinit { udev_unref(context) }

    /// Every device of `subsystem` (and sysname pattern, `event*`) that has a device node, sorted by node;
    /// `parents` names, per subsystem of a parent, the attributes to read from it (the input parent's `name`).
    public func devices(subsystem: String, sysname: String? = nil, parents: [String: [String]] = [:]) -> [UdevDevice] {
        guard let enumerator = udev_enumerate_new(context) else { return [] }
        defer { udev_enumerate_unref(enumerator) }
        udev_enumerate_add_match_subsystem(enumerator, subsystem)
        if let sysname { udev_enumerate_add_match_sysname(enumerator, sysname) }
        udev_enumerate_scan_devices(enumerator)
        var devices: [UdevDevice] = []
        var entry = udev_enumerate_get_list_entry(enumerator)
        while let current = entry {
            if let syspath = udev_list_entry_get_name(current),
                let device = udev_device_new_from_syspath(context, syspath)
            {
                let described = UdevContext.describe(device, parents: parents)
                if described.devnode != nil { devices.append(described) }
                udev_device_unref(device)
            }
            entry = udev_list_entry_get_next(current)
        }
        return devices.sorted { ($0.devnode ?? "") < ($1.devnode ?? "") }
    }

    /// The USB device at `bus` and `address` (sysfs `busnum`, `devnum`), described as `devices` describes one, with
    /// its own `serial`, `idVendor` and `idProduct` attributes in `usb` (they are its own, not a parent's), or nil.
    public func usbDevice(bus: Int, address: Int) -> UdevDevice? {
        guard let enumerator = udev_enumerate_new(context) else { return nil }
        defer { udev_enumerate_unref(enumerator) }
        udev_enumerate_add_match_subsystem(enumerator, "usb")
        udev_enumerate_add_match_sysattr(enumerator, "busnum", String(bus))
        udev_enumerate_add_match_sysattr(enumerator, "devnum", String(address))
        udev_enumerate_scan_devices(enumerator)
        var entry = udev_enumerate_get_list_entry(enumerator)
        while let current = entry {
            entry = udev_list_entry_get_next(current)
            guard let syspath = udev_list_entry_get_name(current),
                let device = udev_device_new_from_syspath(context, syspath)
            else { continue }
            defer { udev_device_unref(device) }
            // Only the device itself has busnum and devnum; its interfaces have neither.
            guard UdevContext.string(udev_device_get_devtype(device)) == "usb_device" else { continue }
            var described = UdevContext.describe(device, parents: [:])
            described.usb = [:]
            for name in ["idVendor", "idProduct", "serial", "product", "manufacturer"] {
                if let value = UdevContext.string(udev_device_get_sysattr_value(device, name)), !value.isEmpty {
                    described.usb[name] = value
                }
            }
            described.usbSyspath = described.syspath
            return described
        }
        return nil
    }

    /// A hot-plug monitor of `subsystem` (events after udev processed them: the "udev" netlink source); each
    /// event's device is described as `devices(subsystem:sysname:parents:)` describes it.
    public func monitor(subsystem: String, parents: [String: [String]] = [:]) throws(SystemError)
        -> UdevDeviceMonitor
    {
        guard let monitor = udev_monitor_new_from_netlink(context, "udev") else {
            throw SystemError("udev_monitor_new_from_netlink", errno: Glibc.errno)
        }
        let status = udev_monitor_filter_add_match_subsystem_devtype(monitor, subsystem, nil)
        if status < 0 {
            udev_monitor_unref(monitor)
            throw SystemError("udev_monitor_filter_add_match_subsystem_devtype", errno: -status)
        }
        let enabled = udev_monitor_enable_receiving(monitor)
        if enabled < 0 {
            udev_monitor_unref(monitor)
            throw SystemError("udev_monitor_enable_receiving", errno: -enabled)
        }
        return UdevDeviceMonitor(monitor, parents: parents)
    }

    static func describe(_ device: OpaquePointer, parents wanted: [String: [String]]) -> UdevDevice {
        var properties: [String: String] = [:]
        var entry = udev_device_get_properties_list_entry(device)
        while let current = entry {
            if let name = string(udev_list_entry_get_name(current)),
                let value = string(udev_list_entry_get_value(current)),
                !value.isEmpty
            {
                properties[name] = value
            }
            entry = udev_list_entry_get_next(current)
        }
        var usb: [String: String] = [:]
        var usbSyspath: String?
        if let parent = udev_device_get_parent_with_subsystem_devtype(device, "usb", "usb_device") {
            usbSyspath = string(udev_device_get_syspath(parent))
            for name in ["idVendor", "idProduct", "serial", "product", "manufacturer"] {
                if let value = string(udev_device_get_sysattr_value(parent, name)), !value.isEmpty {
                    usb[name] = value
                }
            }
        }
        var parents: [String: [String: String]] = [:]
        for (subsystem, names) in wanted {
            guard let parent = udev_device_get_parent_with_subsystem_devtype(device, subsystem, nil) else { continue }
            var values: [String: String] = [:]
            for name in names {
                let value =
                    name == "syspath"
                    ? string(udev_device_get_syspath(parent))
                    : string(udev_device_get_sysattr_value(parent, name))
                        ?? string(udev_device_get_property_value(parent, name))
                if let value, !value.isEmpty { values[name] = value }
            }
            parents[subsystem] = values
        }
        return UdevDevice(
            syspath: string(udev_device_get_syspath(device)) ?? "",
            sysname: string(udev_device_get_sysname(device)) ?? "",
            devnode: string(udev_device_get_devnode(device)), properties: properties, usb: usb, parents: parents,
            usbSyspath: usbSyspath)
    }

    static func string(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
}

/// A udev hot-plug monitor: its fd goes into the owner's `poll()` set.
public final class UdevDeviceMonitor {
    /// One notification: `add`, `remove`, `change`, ...
    public struct Event: Sendable {
        public var action: String
        public var device: UdevDevice
    }

    private let monitor: OpaquePointer
    private let parents: [String: [String]]

    init(_ monitor: OpaquePointer, parents: [String: [String]]) {
        self.monitor = monitor
        self.parents = parents
    }

    deinit { udev_monitor_unref(monitor) }

    public var fd: Int32 { udev_monitor_get_fd(monitor) }

    /// The events ready now (the fd is non-blocking: nil from libudev means drained), at most 64 a call.
    public func receive() -> [Event] {
        var events: [Event] = []
        while let device = udev_monitor_receive_device(monitor) {
            let action = UdevContext.string(udev_device_get_action(device)) ?? ""
            events.append(Event(action: action, device: UdevContext.describe(device, parents: parents)))
            udev_device_unref(device)
            if events.count >= 64 { break }
        }
        return events
    }
}
