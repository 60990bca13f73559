import BridgeCore
import Foundation

/// `scanners --calibrate`: which of xkb-data's layouts explain the keystrokes a scanner typed for the calibration
/// code (`LayoutCalibration`), each layout compiled from xkb-data as `hid.layout` would be.
public enum ScannerCalibration {
    /// Every layout and every variant in xkb-data's catalog (`de`, `de(nodeadkeys)`, ...), sorted.
    public static func catalogNames() -> [String] {
        let catalog = XKBLayouts.catalog
        var names = Array(catalog.layouts.keys)
        for (layout, variants) in catalog.variants where catalog.layouts[layout] != nil {
            names += variants.keys.map { "\(layout)(\($0))" }
        }
        return names.sorted()
    }

    /// The catalog's names `wanted` asks for: `de` means the layout and all its variants, `de(nodeadkeys)` only
    /// that one. Unknown names are returned apart, for the caller to name.
    public static func catalogNames(among wanted: [String]) -> (names: [String], unknown: [String]) {
        let all = catalogNames()
        var names: [String] = []
        var unknown: [String] = []
        for entry in wanted {
            let entry = entry.trimmingCharacters(in: .whitespaces).lowercased()
            let matching = all.filter { $0 == entry || (!entry.contains("(") && $0.hasPrefix(entry + "(")) }
            if matching.isEmpty { unknown.append(entry) } else { names += matching.filter { !names.contains($0) } }
        }
        return (names, unknown)
    }

    /// The verdict over `names` (default: the whole catalog). A layout that cannot be compiled is skipped.
    public static func detect(
        _ events: [InputEvent], expected: String = LayoutCalibration.text, among names: [String]? = nil
    ) -> LayoutCalibration.Verdict {
        var readings: [LayoutCalibration.Reading] = []
        for name in names ?? catalogNames() {
            guard let layout = try? XKBLayouts.layout(name) else { continue }
            readings.append(LayoutCalibration.read(events, layout: layout, expected: expected))
        }
        return LayoutCalibration.verdict(readings)
    }
}
