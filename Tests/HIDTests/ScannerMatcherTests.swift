import BridgeCore
import Testing

@testable import HID

struct ScannerMatcherTests {
    let zebra = InputDeviceInfo(
        devnode: "/dev/input/event3", vendor: "05E0", model: "1200", serial: "Symbol_Scanner_S1",
        serialShort: "S1", path: "pci-0000:00:14.0-usb-0:2:1.0", tagged: true)
    let keyboard = InputDeviceInfo(
        devnode: "/dev/input/event5", vendor: "046d", model: "c31c", serial: "Logitech_K120",
        path: "pci-0000:00:14.0-usb-0:4:1.0")

    @Test func hexIDsAreNormalised() {
        #expect(zebra.vendor == "05e0")
        #expect(InputDeviceInfo.normalizeHexID("0x5E0") == "05e0")
        #expect(InputDeviceInfo.normalizeHexID("C31C") == "c31c")
        #expect(InputDeviceInfo.normalizeHexID("zz") == "zz")
    }

    @Test func taggedDeviceMatchesThroughTheUdevRule() {
        let verdict = ScannerMatcher.verdict(for: zebra, rules: [])
        #expect(verdict.matched && verdict.reason == "udev rule (PLINGS_SCANNER=1)" && verdict.layout == nil)
    }

    @Test func untaggedKeyboardIsNotAScannerAndSaysWhy() {
        let verdict = ScannerMatcher.verdict(for: keyboard, rules: [.init(vendor: "05e0")])
        #expect(!verdict.matched)
        #expect(verdict.reason.contains("046d:c31c") && verdict.reason.contains("PLINGS_SCANNER"))
    }

    @Test func configRulesMatchOnEveryGivenFieldAndCarryTheLayout() {
        let rules: [BridgeConfig.HID.Match] = [
            .init(vendor: "046D", model: "ffff"),
            .init(vendor: "046d", model: "C31C", layout: "se"),
        ]
        let verdict = ScannerMatcher.verdict(for: keyboard, rules: rules)
        #expect(verdict.matched && verdict.layout == "se")
        #expect(verdict.reason == "hid.match[1] (vendor=046d model=c31c)")
        // A rule also wins over the udev tag, so its layout applies.
        let tagged = ScannerMatcher.verdict(for: zebra, rules: [.init(serial: "S1", layout: "de")])
        #expect(tagged.matched && tagged.layout == "de" && tagged.reason.hasPrefix("hid.match[0]"))
        #expect(
            ScannerMatcher.verdict(for: zebra, rules: [.init(serial: "Symbol_Scanner_S1", layout: "fr")]).layout == "fr"
        )
        #expect(ScannerMatcher.verdict(for: keyboard, rules: [.init(path: "pci-0000:00:14.0-usb-0:4:1.0")]).matched)
        #expect(!ScannerMatcher.verdict(for: keyboard, rules: [.init(path: "pci-0000:00:14.0-usb-0:5:1.0")]).matched)
        // `serial` and `path` are shell-style patterns (fnmatch(3)), as in hidpos.match: a port on any controller.
        #expect(ScannerMatcher.verdict(for: keyboard, rules: [.init(path: "*-usb-0:4:1.0")]).matched)
        #expect(!ScannerMatcher.verdict(for: keyboard, rules: [.init(path: "*-usb-0:4")]).matched)
        #expect(ScannerMatcher.verdict(for: zebra, rules: [.init(serial: "Symbol_*")]).matched)
        // A rule's name is the scanner's (issue 44); a rule without one leaves the stable name to decide.
        #expect(
            ScannerMatcher.verdict(for: zebra, rules: [.init(serial: "S1", name: "bench-2-left")]).name
                == "bench-2-left")
        #expect(ScannerMatcher.verdict(for: zebra, rules: [.init(serial: "S1")]).name == nil)
    }

    @Test func emptyRuleMatchesNothing() {
        #expect(!ScannerMatcher.verdict(for: keyboard, rules: [.init(layout: "se")]).matched)
    }

    @Test func nonKeyboardsAreNeverScanners() {
        var mouse = zebra
        mouse.isKeyboard = false
        #expect(!ScannerMatcher.verdict(for: mouse, rules: [.init(vendor: "05e0")]).matched)
    }

    @Test func stableNamesUseSerialWhenUniqueElsePath() {
        var twin = zebra
        twin.devnode = "/dev/input/event4"
        twin.path = "pci-0000:00:14.0-usb-0:3:1.0"
        var anonymous = keyboard
        anonymous.serial = nil
        anonymous.path = nil
        let names = ScannerMatcher.stableNames([zebra, twin, keyboard, anonymous.with(devnode: "/dev/input/event9")])
        #expect(names["/dev/input/event3"] == "pci-0000:00:14.0-usb-0:2:1.0")
        #expect(names["/dev/input/event4"] == "pci-0000:00:14.0-usb-0:3:1.0")
        #expect(names["/dev/input/event5"] == "Logitech_K120")
        #expect(names["/dev/input/event9"] == "/dev/input/event9")
    }
}

extension InputDeviceInfo {
    fileprivate func with(devnode: String) -> InputDeviceInfo {
        var copy = self
        copy.devnode = devnode
        return copy
    }
}
