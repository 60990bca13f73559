import BridgeCore
import Foundation

/// `doctor`'s reader-driver checks: reads /sys, /proc/modules and the PC/SC driver bundles; the conclusions
/// are `ReaderDriverFacts`'.
public enum NFCDriverChecks {
    static let pn533Driver = "/sys/bus/usb/drivers/pn533_usb"
    static let usbDevices = "/sys/bus/usb/devices"
    public static let libccidPlist = "/usr/lib/pcsc/drivers/ifd-ccid.bundle/Contents/Info.plist"
    static let acsccidBundle = "/usr/lib/pcsc/drivers/ifd-acsccid.bundle"

    /// Both checks for `readers` (the attached reader names) under `config`.
    public static func checks(readers: [String], config: BridgeConfig.NFC) -> [DoctorCheck] {
        let fm = FileManager.default
        // Interfaces bound to pn533_usb appear as "<bus>-<port>:<config>.<interface>" links in its driver directory.
        let bound = ((try? fm.contentsOfDirectory(atPath: pn533Driver)) ?? []).filter { $0.contains(":") }.sorted()
        let acr122u = ((try? fm.contentsOfDirectory(atPath: usbDevices)) ?? []).contains { device in
            let read = { (name: String) in
                (try? String(contentsOfFile: "\(usbDevices)/\(device)/\(name)", encoding: .utf8))?
                    .trimmingASCIIWhitespace()
            }
            return read("idVendor") == ReaderDriverFacts.acr122uUSBID.vendor
                && read("idProduct") == ReaderDriverFacts.acr122uUSBID.product
        }
        let modules = (try? String(contentsOfFile: "/proc/modules", encoding: .utf8)) ?? ""
        let loaded = modules.split(separator: "\n").contains { $0.hasPrefix("pn533_usb ") || $0.hasPrefix("pn533 ") }
        let pn533 = ReaderDriverFacts.pn533Check(boundInterfaces: bound, acr122uAttached: acr122u, moduleLoaded: loaded)

        let wanted = config.feedback.enabled || config.silenceDetectBeep
        let escaping = readers.filter {
            wanted && ReaderProfile.resolve(readerName: $0, rules: config.profiles).feedback == .escape
        }
        let plist = try? String(contentsOfFile: libccidPlist, encoding: .utf8)
        let escapes = ReaderDriverFacts.escapeCheck(
            readers: escaping, acsccid: fm.fileExists(atPath: acsccidBundle),
            libccidOptions: plist.flatMap(ReaderDriverFacts.ifdDriverOptions), plistPath: libccidPlist)
        return [pn533, escapes]
    }
}
