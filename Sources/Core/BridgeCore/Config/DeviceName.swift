/// An operator's name for a device: the `name` of a device rule (`hid.match`, `hidpos.match`, `serial.match`,
/// `nfc.names`), used as the scan's `device` everywhere in place of the name the bridge finds (docs/configuration.md,
/// "Device names").
///
/// A name must be usable as one MQTT topic level (MQTT 3.1.1/5.0 section 4.7: no `/`, no wildcard `+` or `#`, no
/// NUL; a leading `$` is kept for the broker's own topics, section 4.7.2), so a later topic per device cannot be
/// split or widened by it; it must also read as one plain token on a terminal, a log line and a metrics label: no
/// control characters, no space at either end, at most 64 characters.
public enum DeviceName {
    /// The longest name (characters).
    public static let maximumLength = 64

    /// Why `text` cannot name a device, or nil.
    public static func problem(_ text: String) -> String? {
        let shown = "'" + String(String.UnicodeScalarView(text.unicodeScalars.prefix(64).map(visible))) + "'"
        if text.isEmpty { return "a device name must not be empty" }
        if text.count > maximumLength { return "\(shown) is longer than \(maximumLength) characters" }
        if text.contains("/") { return "\(shown) must be one MQTT topic level (no '/')" }
        if text.contains("+") || text.contains("#") {
            return "\(shown) contains an MQTT wildcard (+ or #)"
        }
        if text.hasPrefix("$") { return "\(shown) starts with '$', which MQTT keeps for the broker's own topics" }
        if text.unicodeScalars.contains(where: isControl) {
            return "\(shown) contains a control character"
        }
        if text.first?.isWhitespace == true || text.last?.isWhitespace == true {
            return "\(shown) starts or ends with a space"
        }
        return nil
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// A control character as `?`, so the error that quotes a name cannot move a terminal's cursor.
    private static func visible(_ scalar: Unicode.Scalar) -> Unicode.Scalar { isControl(scalar) ? "?" : scalar }

    /// `text` as the name at `origin` (`hid.match[1].name`), or the error saying what is wrong with it.
    public static func check(_ text: String, at origin: String) throws(ConfigError) -> String {
        if let problem = problem(text) { throw ConfigError("\(origin): \(problem)") }
        return text
    }

    /// The names a rule list (`hid.match`) gives, each with its key (`hid.match[2].name`), for `checkUnique`;
    /// `names` holds each rule's name in order, nil for a rule without one.
    public static func given(_ names: [String?], in list: String) -> [(key: String, name: String)] {
        names.enumerated().compactMap { index, name in name.map { ("\(list)[\(index)].name", $0) } }
    }

    /// Fails when two rules give one name: each device needs its own, or its reads could not be told apart.
    /// `names` are the rules' keys (`nfc.names[0].name`) with the name each gives, in configuration order.
    public static func checkUnique(_ names: [(key: String, name: String)]) throws(ConfigError) {
        var first: [String: String] = [:]
        for (key, name) in names {
            if let earlier = first[name] {
                throw ConfigError(
                    "\(earlier) and \(key) both name a device '\(name)': each rule needs a name of its own, or the "
                        + "reads of two devices could not be told apart")
            }
            first[name] = key
        }
    }
}
