import BridgeCore
import CPCSCLite
import Udev

/// Where a PC/SC reader is plugged in, which does not change when pcscd numbers readers in another order after a
/// reboot or a replug (`ACS ACR122U PICC Interface 00 00` and `... 01 00` swap): the udev `ID_PATH` of its USB
/// device (the port) and its USB serial number, when it has one.
///
/// Found from the reader's `SCARD_ATTR_CHANNEL_ID` (PC/SC part 3 and pcsc-lite's reader.h: a DWORD `0xDDDDCCCC`,
/// DDDD the data channel type, CCCC the channel number). For USB (type 0x0020) libccid gives the channel number as
/// the device's bus number and address, `bus << 8 | address`, which udev knows as `busnum` and `devnum`. A reader
/// whose driver gives no channel, or another kind (vpcd, a network reader), has no identity: it keeps its PC/SC
/// name, and `note` says why.
public struct ReaderIdentity: Sendable, Equatable {
    /// The USB port, as udev's `ID_PATH` writes it (`pci-0000:00:14.0-usb-0:2.3`); nil when unknown.
    public var path: String?
    /// The USB device's serial number (its `serial` attribute, udev's `ID_SERIAL_SHORT`); nil when it has none.
    public var serial: String?
    /// Why `path` is unknown (no USB channel, no such USB device), for `readers` and `doctor`; nil when known.
    public var note: String?

    public init(path: String? = nil, serial: String? = nil, note: String? = nil) {
        self.path = path
        self.serial = serial
        self.note = note
    }

    /// The USB data channel type in `SCARD_ATTR_CHANNEL_ID`'s upper word (PC/SC part 3, table 3-1).
    static let usbChannelType: UInt32 = 0x0020

    /// The bus number and device address in a reader's `SCARD_ATTR_CHANNEL_ID` value (4 bytes, host order, as
    /// pcsc-lite passes the driver's DWORD), or nil when the channel is not USB.
    public static func usbChannel(_ attribute: [UInt8]) -> (bus: Int, address: Int)? {
        guard attribute.count >= 4 else { return nil }
        let value = attribute.prefix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard value >> 16 == usbChannelType else { return nil }
        let bus = Int(value >> 8 & 0xFF), address = Int(value & 0xFF)
        guard bus > 0, address > 0 else { return nil }
        return (bus, address)
    }

    /// The identity of `reader`: its channel asked over a direct connection (no card needed, nothing sent to a
    /// card), then udev. Never throws: what is unknown is said in `note`.
    static func of(reader: String, context: PCSCContext, udev: UdevContext?) -> ReaderIdentity {
        let attribute: [UInt8]
        do {
            let card = try context.connect(reader: reader, direct: true)
            defer { card.disconnect() }
            attribute = try card.attribute(PCSCCard.channelIDAttribute)
        } catch {
            // vpcd, and drivers that keep no channel, refuse the attribute; anything else (a reader in use by
            // another program, gone meanwhile) is said as it is.
            let said = error.code == SCARD_E_UNSUPPORTED_FEATURE ? "its driver does not say" : "cannot ask it"
            return ReaderIdentity(note: "\(said) (\(error.name))")
        }
        guard let (bus, address) = usbChannel(attribute) else {
            return ReaderIdentity(note: "not a USB reader")
        }
        guard let udev else { return ReaderIdentity(note: "udev is not available") }
        return lookup(bus: bus, address: address, udev: udev)
    }

    /// The identity of the USB device at `bus`/`address` as udev knows it: its `ID_PATH` when udev set one (the
    /// package's rule asks udev's `path_id` for every USB device), else the same built from its sysfs path.
    static func lookup(bus: Int, address: Int, udev: UdevContext) -> ReaderIdentity {
        guard let device = udev.usbDevice(bus: bus, address: address) else {
            return ReaderIdentity(note: "no USB device at bus \(bus) address \(address)")
        }
        let path = device["ID_PATH"] ?? usbPortPath(syspath: device.syspath)
        let serial = device["ID_SERIAL_SHORT"] ?? device.usb["serial"]
        return ReaderIdentity(
            path: path, serial: serial, note: path == nil ? "no USB port path for \(device.syspath)" : nil)
    }

    /// udev's `path_id` for a USB device from its sysfs path, for the controllers a gate box has: the nearest PCI
    /// device (`pci-0000:00:14.0`) behind the platform device it sits on, if any (`platform-fd500000.pcie-pci-...`),
    /// or a platform controller alone (`platform-xhci-hcd.0.auto`); then `usb-0:` and the port chain after the bus
    /// number (`1-2.3` gives `usb-0:2.3`). nil for anything else (udev's own `ID_PATH` is used when there is one).
    public static func usbPortPath(syspath: String) -> String? {
        let parts = syspath.split(separator: "/").map(String.init)
        guard let last = parts.last, let dash = last.firstIndex(of: "-"), !last.contains(":") else { return nil }
        var path = ["usb-0:" + last[last.index(after: dash)...]]
        // The usb root hub (`usb1`) above the device: its controller is the component before it.
        guard let root = parts.lastIndex(where: { $0.hasPrefix("usb") && Int($0.dropFirst(3)) != nil }) else {
            return nil
        }
        var index = root - 1
        if index >= 0, isPCIAddress(parts[index]) {
            path.insert("pci-" + parts[index], at: 0)
            // path_id names the nearest PCI device only: bridges and the host bridge (`pci0000:00`) are skipped.
            while index >= 0, isPCIAddress(parts[index]) || parts[index].hasPrefix("pci") { index -= 1 }
        }
        if let platform = parts.firstIndex(of: "platform"), index > platform {
            path.insert("platform-" + parts[index], at: 0)
        }
        return path.count > 1 ? path.joined(separator: "-") : nil
    }

    /// `0000:00:14.0`: domain, bus, device and function, as sysfs names a PCI device.
    static func isPCIAddress(_ text: String) -> Bool {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0].count == 4, fields[1].count == 2 else { return false }
        let last = fields[2].split(separator: ".", omittingEmptySubsequences: false)
        return last.count == 2 && last[0].count == 2 && last[1].count == 1
            && text.unicodeScalars.allSatisfy { $0.properties.isASCIIHexDigit || $0 == ":" || $0 == "." }
    }
}
