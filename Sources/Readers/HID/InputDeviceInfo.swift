/// What udev knows about one evdev node: the facts discovery and matching go by.
public struct InputDeviceInfo: Sendable, Equatable {
    /// `/dev/input/eventN`.
    public var devnode: String
    /// The udev syspath (used to recognise the node in remove events).
    public var syspath: String
    /// Human product name (the input device's `name`, else `ID_MODEL`).
    public var name: String
    /// USB vendor id, 4-digit lower-case hex (`ID_VENDOR_ID`, else the USB parent's `idVendor`).
    public var vendor: String?
    /// USB product id, 4-digit lower-case hex (`ID_MODEL_ID`, else `idProduct`).
    public var model: String?
    /// `ID_SERIAL` (vendor_model_serial), the default stable name.
    public var serial: String?
    /// `ID_SERIAL_SHORT` (the bare serial number), also accepted by a `hid.match` `serial`.
    public var serialShort: String?
    /// `ID_PATH`: where the scanner is plugged in; tells identical scanners apart.
    public var path: String?
    /// Our udev rule tagged it (`PLINGS_SCANNER=1`).
    public var tagged: Bool
    /// udev says it is a keyboard (`ID_INPUT_KEYBOARD=1`): only keyboards are candidates.
    public var isKeyboard: Bool

    public init(
        devnode: String, syspath: String = "", name: String = "", vendor: String? = nil, model: String? = nil,
        serial: String? = nil, serialShort: String? = nil, path: String? = nil, tagged: Bool = false,
        isKeyboard: Bool = true
    ) {
        self.devnode = devnode
        self.syspath = syspath
        self.name = name
        self.vendor = vendor.map(Self.normalizeHexID)
        self.model = model.map(Self.normalizeHexID)
        self.serial = serial
        self.serialShort = serialShort
        self.path = path
        self.tagged = tagged
        self.isKeyboard = isKeyboard
    }

    /// `05E0`, `0x5e0` and `5e0` all become `05e0`, so config and udev values compare equal.
    public static func normalizeHexID(_ text: String) -> String {
        var value = text.lowercased()
        if value.hasPrefix("0x") { value.removeFirst(2) }
        if let number = UInt16(value, radix: 16) {
            let hex = String(number, radix: 16)
            return String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }
        return value
    }
}
