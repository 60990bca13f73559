import Glibc

/// A device rule's field as a shell-style pattern (`*`, `?`, `[...]`, fnmatch(3)), as `hid.match`, `hidpos.match`,
/// `serial.match` and `nfc.names` take them: a plain value matches only itself.
public enum ShellPattern {
    /// True when the rule gives no `pattern` (any value), or one of `values` is known and matches it.
    public static func matches(_ pattern: String?, _ values: String?...) -> Bool {
        guard let pattern else { return true }
        return values.contains { $0.map { fnmatch(pattern, $0, 0) == 0 } ?? false }
    }
}
