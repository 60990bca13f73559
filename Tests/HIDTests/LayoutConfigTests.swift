import Bridge
import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

@testable import HID

/// `hid.layout`, `hid.variant` and `hid.match[].layout|variant` are checked against xkb-data at load: an
/// unknown name is a configuration error (the CLI exits 2) naming the key and listing close names.
struct LayoutConfigTests {
    private func load(_ environment: [String: String], file: String? = nil) -> Result<Settings, ConfigError> {
        let dir = TemporaryDirectory("layout-config")
        defer { dir.remove() }
        var path: String?
        if let file {
            let configPath = dir.file("config.json")
            _ = FileManager.default.createFile(atPath: configPath, contents: Data(file.utf8))
            path = configPath
        }
        var env = environment
        env["HOME"] = dir.path
        do {
            return .success(try Settings.load(configPath: path, flags: [], environment: env))
        } catch {
            return .failure(error)
        }
    }

    private func error(_ environment: [String: String], file: String? = nil) -> String {
        if case .failure(let error) = load(environment, file: file) { return error.message }
        return "(loaded)"
    }

    @Test func unknownLayoutNamesTheKeyAndCloseNames() {
        let message = error(["PLINGS_BRIDGE_HID_LAYOUT": "xx"])
        #expect(message.hasPrefix("hid.layout: unknown keyboard layout 'xx'"), "\(message)")
        let typo = error(["PLINGS_BRIDGE_HID_LAYOUT": "dee"])
        #expect(typo.hasPrefix("hid.layout: unknown keyboard layout 'dee'; close names: "), "\(typo)")
        #expect(typo.contains("de"))
    }

    @Test func unknownVariantNamesTheKeyAndCloseNames() {
        let inline = error(["PLINGS_BRIDGE_HID_LAYOUT": "de(nodeadkey)"])
        #expect(inline.hasPrefix("hid.layout: layout 'de' has no variant 'nodeadkey'; close names: nodeadkeys"))
        let separate = error(["PLINGS_BRIDGE_HID_LAYOUT": "de", "PLINGS_BRIDGE_HID_VARIANT": "nodead"])
        #expect(separate.hasPrefix("hid.variant: layout 'de' has no variant 'nodead'"), "\(separate)")
        let clash = error(["PLINGS_BRIDGE_HID_LAYOUT": "de(nodeadkeys)", "PLINGS_BRIDGE_HID_VARIANT": "mac"])
        #expect(clash.hasPrefix("hid.layout: layout 'de(nodeadkeys)' names variant"), "\(clash)")
    }

    @Test func matchRuleLayoutsAreCheckedToo() {
        let file = #"{"hid": {"match": [{"vendor": "05e0", "layout": "se"}, {"serial": "X", "layout": "sw"}]}}"#
        let message = error([:], file: file)
        #expect(message.hasPrefix("hid.match[1].layout: unknown keyboard layout 'sw'"), "\(message)")
        let variant = #"{"hid": {"layout": "ch", "match": [{"serial": "X", "variant": "french"}]}}"#
        #expect(error([:], file: variant).hasPrefix("hid.match[0].variant: layout 'ch' has no variant 'french'"))
    }

    @Test func knownNamesLoadAndCompile() throws {
        for (layout, variant) in [("uk", nil), ("de(nodeadkeys)", nil), ("de", "nodeadkeys"), ("US(Intl)", nil)] {
            var env = ["PLINGS_BRIDGE_HID_LAYOUT": layout]
            env["PLINGS_BRIDGE_HID_VARIANT"] = variant
            guard case .success(let settings) = load(env) else {
                Issue.record("\(layout) \(variant ?? "") did not load: \(error(env))")
                continue
            }
            let compiled = try XKBLayouts.layout(settings.config.hid.layout, variant: settings.config.hid.variant)
            #expect(!compiled.characters.isEmpty)
        }
        #expect(try XKBLayouts.layout("uk").name == "gb")
        #expect(try XKBLayouts.layout("de", variant: "nodeadkeys").name == "de(nodeadkeys)")
        #expect(try XKBLayouts.layout("de", variant: "nodeadkeys").displayName == "German (no dead keys)")
        // HID off: layouts are not looked at.
        #expect(error(["PLINGS_BRIDGE_HID_LAYOUT": "xx", "PLINGS_BRIDGE_HID_ENABLED": "false"]) == "(loaded)")
    }

    /// xkb-data's de has dead keys; de(nodeadkeys) types the accents themselves (symbols/de).
    @Test func variantChangesTheTable() throws {
        let de = try XKBLayouts.layout("de")
        let plain = try XKBLayouts.layout("de(nodeadkeys)")
        #expect(de.isDeadKey(Evdev.KEY_GRAVE, shift: false, altGr: false))
        #expect(!plain.isDeadKey(Evdev.KEY_GRAVE, shift: false, altGr: false))
        #expect(plain.character(forKey: Evdev.KEY_GRAVE, shift: false, altGr: false) == "^")
    }
}
