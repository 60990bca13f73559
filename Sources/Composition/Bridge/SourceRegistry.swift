import BridgeCore
import HID
import HIDPOS
import NFC
import SinkKit
import SourceKit
import Serial

/// Every kind of read source the bridge has, in the order `status`, `doctor` and the start-up log show them. A new
/// source module adds its `ReadSourceModule` here (docs/architecture.md, "Add a read source").
public enum SourceRegistry {
    public static let modules: [ReadSourceModule] = [.nfc, .hid, .hidpos, .serial]

    /// The module for `kind`, nil for `manual` and unknown kinds.
    public static func module(_ kind: SourceKind) -> ReadSourceModule? { modules.first { $0.kind == kind } }
}
