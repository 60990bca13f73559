/// Who a device node is, as udev and sysfs tell it: what match rules, names and `plings-bridge scanners` use, the
/// same for every transport that finds its scanners through udev (HID POS hidraw nodes, serial ports).
public struct DeviceIdentity: Sendable, Equatable {
    public var devnode: String
    /// USB vendor and product ids, lower-case hex.
    public var vendor: String?
    public var product: String?
    /// The USB serial number.
    public var serial: String?
    /// The product's name.
    public var model: String?
    /// udev's `ID_PATH`: where it is plugged in.
    public var path: String?
    /// udev's `ID_SERIAL` (vendor_model_serial), or the same built from the device's strings.
    public var fullSerial: String?
    /// The name the operator gave it (the `name` of the match rule that matched it), if any.
    public var operatorName: String?

    public init(
        devnode: String, vendor: String? = nil, product: String? = nil, serial: String? = nil, model: String? = nil,
        path: String? = nil, fullSerial: String? = nil
    ) {
        (self.devnode, self.vendor, self.product, self.serial) = (devnode, vendor, product, serial)
        (self.model, self.path, self.fullSerial) = (model, path, fullSerial)
    }

    /// The name its reads carry (`source.device`): the operator's name, else `ID_SERIAL` (stable across ports and
    /// reboots), else `ID_PATH` (the USB port), else the device node.
    public var stableName: String { operatorName ?? fullSerial ?? path ?? devnode }
}

/// A device described by a `DeviceIdentity` and more of its own: the identity's fields read as its own
/// (`info.vendor`, `info.stableName`).
@dynamicMemberLookup
public protocol IdentifiedDevice {
    var identity: DeviceIdentity { get set }
}

extension IdentifiedDevice {
    public subscript<Value>(dynamicMember field: WritableKeyPath<DeviceIdentity, Value>) -> Value {
        get { identity[keyPath: field] }
        set { identity[keyPath: field] = newValue }
    }

    public subscript<Value>(dynamicMember field: KeyPath<DeviceIdentity, Value>) -> Value { identity[keyPath: field] }
}
