import BridgeCore
import NFC
import Testing

/// The `nfc` section, which the NFC module owns: its keys arrive from the file and the environment, and a bad value
/// is refused with the key and the reason (the ACS manuals' units: 100 ms blink steps).
@Suite struct NFCConfigTests {
    @Test("config: nfc.profiles, nfc.feedback and nfc.silenceDetectBeep")
    func config() throws {
        var loader = ConfigLoader(sections: [NFCConfig.self])
        try loader.applyFile(
            Array(
                #"""
                {"nfc": {"profiles": [{"reader": "Virtual PCD 00 00", "profile": "acr122u"}],
                         "feedback": {"enabled": true, "accepted": "green 2x200", "failed": "off"},
                         "silenceDetectBeep": true}}
                """#.utf8), origin: "f")
        let nfc = loader.config.nfc
        #expect(nfc.profiles == [.init(reader: "Virtual PCD 00 00", profile: .acr122u)])
        #expect(nfc.feedback.accepted == .init(led: .green, beeps: 2, milliseconds: 200))
        #expect(nfc.feedback.unrecognized == .init(led: .orange, beeps: 2, milliseconds: 100))
        #expect(nfc.feedback.failed == .off)
        #expect(nfc.silenceDetectBeep)
        #expect(!BridgeConfig().nfc.silenceDetectBeep && BridgeConfig().nfc.feedback.enabled)

        try loader.applyEnvironment(["PLINGS_BRIDGE_NFC_FEEDBACK_ENABLED": "false"])
        #expect(!loader.config.nfc.feedback.enabled)
        for (json, message) in [
            (
                #"{"nfc":{"profiles":[{"reader":"X","profile":"acr999"}]}}"#,
                "config key 'nfc.profiles' in f[0].profile: expected one of acr122u, acr1252u, omnikey, acr1552u, identiv, plain"
            ),
            (
                #"{"nfc":{"profiles":[{"profile":"plain"}]}}"#,
                "config key 'nfc.profiles' in f[0].reader: expected a non-empty substring of a reader name"
            ),
            (
                #"{"nfc":{"profiles":[{"reader":"X","profile":"plain","beep":1}]}}"#,
                "config key 'nfc.profiles' in f[0]: unknown key 'beep'"
            ),
            (
                #"{"nfc":{"feedback":{"accepted":"green 1x50"}}}"#,
                "config key 'nfc.feedback.accepted' in f: the duration must be 100...2500 ms in steps of 100, got 50"
            ),
        ] {
            var fresh = ConfigLoader(sections: [NFCConfig.self])
            #expect(throws: ConfigError(message)) { try fresh.applyFile(Array(json.utf8), origin: "f") }
        }
    }
}

/// Device names (issue 44): `nfc.names` and the `name` of the scanner rules, checked across sections, and where a
/// PC/SC reader is plugged in, decoded as the PC/SC and udev documents say.
@Suite struct DeviceNameConfigTests {
    func load(_ json: String) throws(ConfigError) -> BridgeConfig {
        var loader = ConfigLoader(sections: [NFCConfig.self])
        try loader.applyFile(Array(json.utf8), origin: "f")
        try loader.validateSections()
        return loader.config
    }

    @Test func nfcNamesAreRulesWhoseFirstMatchNamesTheReader() throws {
        let config = try load(
            #"""
            {"nfc": {"names": [{"path": "pci-0000:00:14.0-usb-0:1", "name": "gate-3-in"},
                               {"reader": "ACS ACR122U*", "serial": "RR123", "name": "gate-3-out"},
                               {"reader": "ACS ACR122U*", "name": "gate-any"}]}}
            """#)
        let nfc = config.nfc
        #expect(nfc.names.count == 3)
        let reader = "ACS ACR122U PICC Interface 00 00"
        let port1 = ReaderIdentity(path: "pci-0000:00:14.0-usb-0:1", serial: "RR123")
        let port2 = ReaderIdentity(path: "pci-0000:00:14.0-usb-0:2", serial: "RR123")
        // Every given field must match; the first rule that matches wins.
        #expect(nfc.name(of: reader, identity: port1) == "gate-3-in")
        #expect(nfc.name(of: reader, identity: port2) == "gate-3-out")
        #expect(nfc.name(of: reader, identity: ReaderIdentity(path: "x")) == "gate-any")
        // A reader whose port is unknown (vpcd, a network reader) never matches a path rule; no rule: its PC/SC name.
        #expect(nfc.name(of: "Virtual PCD 00 00", identity: ReaderIdentity(note: "no channel")) == "Virtual PCD 00 00")
        #expect(nfc.name(of: reader, identity: nil) == "gate-any")
    }

    @Test func badNamesAndTwoRulesGivingOneNameAreConfigurationErrors() {
        // MQTT 3.1.1 section 4.7: '/' separates levels, '+' and '#' are wildcards, '$' topics are the broker's.
        for (json, message) in [
            (
                #"{"nfc":{"names":[{"reader":"X","name":"gate/3"}]}}"#,
                "[0].name: 'gate/3' must be one MQTT topic level (no '/')"
            ),
            (#"{"nfc":{"names":[{"reader":"X","name":"gate+"}]}}"#, "contains an MQTT wildcard (+ or #)"),
            (##"{"nfc":{"names":[{"reader":"X","name":"#"}]}}"##, "contains an MQTT wildcard (+ or #)"),
            (#"{"nfc":{"names":[{"reader":"X","name":"$SYS"}]}}"#, "starts with '$'"),
            (#"{"nfc":{"names":[{"reader":"X","name":""}]}}"#, "a device name must not be empty"),
            (#"{"nfc":{"names":[{"reader":"X","name":" gate"}]}}"#, "starts or ends with a space"),
            (#"{"nfc":{"names":[{"reader":"X","name":"a\u0000b"}]}}"#, "contains a control character"),
            (#"{"nfc":{"names":[{"reader":"X","name":"gate\u001b[2J"}]}}"#, "'gate?[2J' contains a control character"),
            (#"{"nfc":{"names":[{"reader":"X"}]}}"#, "[0]: a rule needs a name"),
            (#"{"nfc":{"names":[{"name":"gate"}]}}"#, "a match needs at least one of reader, path, serial"),
            (#"{"nfc":{"names":[{"reader":"X","name":"gate","door":"in"}]}}"#, "unknown key 'door'"),
            (
                #"{"nfc":{"names":[{"reader":"X","name":"gate"},{"path":"p","name":"gate"}]}}"#,
                "nfc.names[0].name and nfc.names[1].name both name a device 'gate'"
            ),
        ] {
            do throws(ConfigError) {
                _ = try load(json)
                Issue.record("accepted: \(json)")
            } catch {
                #expect(error.message.contains(message), "\(json): \(error.message)")
            }
        }
        // Non-ASCII names are names (an operator's language): one MQTT level, no control character.
        #expect((try? load(#"{"nfc":{"names":[{"reader":"X","name":"Kassa-Ö 2"}]}}"#)) != nil)
    }

    /// PC/SC part 3 (and pcsc-lite's reader.h): `SCARD_ATTR_CHANNEL_ID` is a DWORD `0xDDDDCCCC`, DDDD the channel
    /// type (0x0020: USB), CCCC the channel number, which libccid gives as `bus << 8 | address`. pcsc-lite hands
    /// the driver's DWORD over in host order (little-endian here).
    @Test func theChannelIDGivesTheUSBBusAndAddress() {
        // Bus 3, address 5 on USB: 0x00200305.
        #expect(ReaderIdentity.usbChannel([0x05, 0x03, 0x20, 0x00]).map { [$0.bus, $0.address] } == [3, 5])
        #expect(ReaderIdentity.usbChannel([0x7F, 0x01, 0x20, 0x00]).map { [$0.bus, $0.address] } == [1, 127])
        // Type 0x0001 is a serial port (COM1..), 0x0040 PS/2: not USB, no port to look up.
        #expect(ReaderIdentity.usbChannel([0x01, 0x00, 0x01, 0x00]) == nil)
        #expect(ReaderIdentity.usbChannel([0x00, 0x00, 0x40, 0x00]) == nil)
        #expect(ReaderIdentity.usbChannel([0x05, 0x03]) == nil)
    }

    /// udev's path_id (systemd's udev-builtin-path_id.c, as `udevadm info` shows on the machines whose sysfs the
    /// HID rigs hold: `pci-0000:00:14.0-usb-0:2:1.0` for an interface of device 1-2): the nearest PCI device, then
    /// `usb-0:` and the port chain; a controller on the platform bus is `platform-<name>`.
    @Test func theUSBPortPathIsUdevsPathID() {
        #expect(
            ReaderIdentity.usbPortPath(syspath: "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2")
                == "pci-0000:00:14.0-usb-0:2")
        #expect(
            ReaderIdentity.usbPortPath(syspath: "/sys/devices/pci0000:00/0000:00:1c.0/0000:03:00.0/usb3/3-1.4.2")
                == "pci-0000:03:00.0-usb-0:1.4.2")
        // A Raspberry Pi 4 (VL805 behind the SoC's PCIe) and a Pi 3 (dwc_otg on the platform bus).
        #expect(
            ReaderIdentity.usbPortPath(
                syspath: "/sys/devices/platform/scb/fd500000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/usb1/1-1.3")
                == "platform-fd500000.pcie-pci-0000:01:00.0-usb-0:1.3")
        #expect(
            ReaderIdentity.usbPortPath(syspath: "/sys/devices/platform/soc/3f980000.usb/usb1/1-1.2")
                == "platform-3f980000.usb-usb-0:1.2")
        // An interface, a root hub and a virtual device are not a USB device's port.
        #expect(ReaderIdentity.usbPortPath(syspath: "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0") == nil)
        #expect(ReaderIdentity.usbPortPath(syspath: "/sys/devices/pci0000:00/0000:00:14.0/usb1") == nil)
        #expect(ReaderIdentity.usbPortPath(syspath: "/sys/devices/virtual/misc/uhid") == nil)
    }
}
