/// A configuration problem, naming the key, variable or flag at fault (the CLI exits 2 with it).
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Builds a `BridgeConfig` from the three layers of docs/contracts.md, "Configuration": JSON file, then
/// `PLINGS_BRIDGE_*` environment, then command-line flags; later wins.
///
/// Every layer is checked against one schema (`schema`: the core keys below plus every registered module section's,
/// `ConfigSection`), so a key is spelled, typed and bounded in exactly one place and every error names where the
/// bad value came from.
public struct ConfigLoader {
    /// The type and bounds of one configuration key.
    public enum Kind: Sendable, Equatable {
        case bool
        case number(min: Double, max: Double)
        case integer(min: Int, max: Int)
        case string
        case optionalString
        case choice([String])
        case stringList
        case fixedLocation
        /// A structure of its own, set only in the config file; the text names it in the refusal of any other
        /// layer ("scanner matches").
        case fileOnly(String)
        /// A value with a syntax of its own, written as one string (a feedback pattern `"green 1x100"`).
        case textForm
    }

    /// One configuration key: its dotted path, its type and bounds, and where a checked value lands in
    /// `BridgeConfig`. The table below is the only place a key is named, so a key cannot be parsed and then
    /// silently ignored.
    public struct Key: Sendable {
        public let path: String
        public let kind: Kind
        /// Checks `value` against the kind (and any rule of its own) and stores it; `origin` names the source.
        let store:
            @Sendable (_ config: inout BridgeConfig, _ value: JSONValue, _ origin: String) throws(ConfigError) -> Void

        public init(
            path: String, kind: Kind,
            store: @escaping @Sendable (inout BridgeConfig, JSONValue, String) throws(ConfigError) -> Void
        ) {
            self.path = path
            self.kind = kind
            self.store = store
        }
    }

    /// The core keys, by dotted path (objects are implied by the paths); the modules' sections add theirs.
    public static let coreSchema: [Key] = [
        optionalText("spool.path", \.spool.path),
        choice("spool.synchronous", \.spool.synchronous),
        number("spool.deliveredRetention", 0...(10 * 365 * 86_400), \.spool.deliveredRetention),
        flag("location.enabled", \.location.enabled),
        // Empty: no gpsd is asked (a gate with a fixed position and no receiver).
        text("location.gpsd", \.location.gpsd, allowEmpty: true) {
            HostPort.parse($0) == nil ? "expected HOST:PORT, got '\($0.prefix(64))'" : nil
        },
        number("location.maxFixAge", 0.1...86_400, \.location.maxFixAge),
        integer("location.minMode", 2...3, \.location.minMode),
        structured("location.fixed", .fixedLocation, \.location.fixed, fixedLocation),
        flag("location.timeFromGPS", \.location.timeFromGPS),
        optionalText("metrics.textfile", \.metrics.textfile),
        number("metrics.interval", 1...3600, \.metrics.interval),
        list("hosts", \.hosts, ifEmpty: "at least one host is needed") { $0.lowercased() },
    ]

    // MARK: Kinds of key: each checks its JSON value once and stores it through a key path.

    /// The field a key sets (a key path literal, Sendable as it captures nothing: SE-0418).
    public typealias Field<Value> = WritableKeyPath<BridgeConfig, Value> & Sendable

    public static func fail(_ origin: String, _ expected: String, _ value: JSONValue) -> ConfigError {
        ConfigError("\(origin): expected \(expected), got \(value.typeName)")
    }

    public static func flag(_ path: String, _ field: Field<Bool>) -> Key {
        Key(path: path, kind: .bool) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            guard let b = value.boolValue else { throw fail(origin, "true or false", value) }
            config[keyPath: field] = b
        }
    }

    public static func number(_ path: String, _ range: ClosedRange<Double>, _ field: Field<Double>) -> Key {
        Key(path: path, kind: .number(min: range.lowerBound, max: range.upperBound)) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            guard let d = value.doubleValue else { throw fail(origin, "a number of seconds", value) }
            guard range.contains(d) else {
                throw ConfigError("\(origin): \(d) is outside \(range.lowerBound)...\(range.upperBound)")
            }
            config[keyPath: field] = d
        }
    }

    public static func integer(_ path: String, _ range: ClosedRange<Int>, _ field: Field<Int>) -> Key {
        Key(path: path, kind: .integer(min: range.lowerBound, max: range.upperBound)) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            guard case .integer(let i) = value else { throw fail(origin, "a whole number", value) }
            guard range.contains(i) else {
                throw ConfigError("\(origin): \(i) is outside \(range.lowerBound)...\(range.upperBound)")
            }
            config[keyPath: field] = i
        }
    }

    /// A non-empty string (or empty too, with `allowEmpty`: "none"); `problem` returns why a value is refused.
    public static func text(
        _ path: String, _ field: Field<String>, allowEmpty: Bool = false,
        problem: (@Sendable (String) -> String?)? = nil
    ) -> Key {
        Key(path: path, kind: .string) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            guard let s = value.stringValue, allowEmpty || !s.isEmpty else {
                throw fail(origin, "a non-empty string", value)
            }
            if !s.isEmpty, let why = problem?(s) { throw ConfigError("\(origin): \(why)") }
            config[keyPath: field] = s
        }
    }

    /// A string, or null (an empty string too) for "not set".
    public static func optionalText(
        _ path: String, _ field: Field<String?>, problem: (@Sendable (String) -> String?)? = nil
    ) -> Key {
        Key(path: path, kind: .optionalString) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            if value.isNull {
                config[keyPath: field] = nil
                return
            }
            guard let s = value.stringValue else { throw fail(origin, "a string or null", value) }
            if !s.isEmpty, let why = problem?(s) { throw ConfigError("\(origin): \(why)") }
            config[keyPath: field] = s.isEmpty ? nil : s
        }
    }

    public static func choice<Choice: RawRepresentable<String> & CaseIterable & SendableMetatype>(
        _ path: String, _ field: Field<Choice>
    ) -> Key {
        let names = Choice.allCases.map(\.rawValue)
        return Key(path: path, kind: .choice(names)) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            guard let s = value.stringValue, let chosen = Choice(rawValue: s) else {
                throw ConfigError(
                    "\(origin): expected one of \(names.joined(separator: ", ")), got \(value.encoded().prefix(64))")
            }
            config[keyPath: field] = chosen
        }
    }

    /// An array of non-empty strings, each passed through `transform`; `ifEmpty` refuses an empty array.
    public static func list(
        _ path: String, _ field: Field<[String]>, ifEmpty: String? = nil,
        transform: @escaping @Sendable (String) -> String = { $0 }
    ) -> Key {
        Key(path: path, kind: .stringList) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            guard case .array(let items) = value else { throw fail(origin, "an array of strings", value) }
            var strings: [String] = []
            for item in items {
                guard let s = item.stringValue, !s.isEmpty else {
                    throw ConfigError("\(origin): expected an array of non-empty strings, found \(item.typeName)")
                }
                strings.append(transform(s))
            }
            if let ifEmpty, strings.isEmpty { throw ConfigError("\(origin): \(ifEmpty)") }
            config[keyPath: field] = strings
        }
    }

    /// An array of objects (`hid.match`, `serial.match`): each object's members, with where it stands (`origin[2]`)
    /// for the errors about it.
    public static func objects(_ value: JSONValue, at origin: String) throws(ConfigError) -> [(
        origin: String, members: [(String, JSONValue)]
    )] {
        guard case .array(let items) = value else { throw ConfigError("\(origin): expected an array of objects") }
        var objects: [(origin: String, members: [(String, JSONValue)])] = []
        for (index, item) in items.enumerated() {
            guard case .object(let members) = item else { throw ConfigError("\(origin)[\(index)]: expected an object") }
            objects.append(("\(origin)[\(index)]", members))
        }
        return objects
    }

    /// The rules of a device match list (`hid.match`, `hidpos.match`, `serial.match`): an array of objects whose
    /// members are among `keys`, each a string or null ("any"); those in `usbIDs` are USB ids, checked and written as
    /// udev writes them. Each rule must give at least one of `identifying`. A `name` member (when `keys` has it) is
    /// the operator's name for the devices the rule matches, checked as `DeviceName` says. Returns each rule's given
    /// members.
    public static func matchRules(
        _ value: JSONValue, at origin: String, keys: [String], usbIDs: Set<String>, identifying: [String]
    ) throws(ConfigError) -> [[String: String]] {
        var rules: [[String: String]] = []
        for (where_, members) in try objects(value, at: origin) {
            var rule: [String: String] = [:]
            for (key, field) in members {
                guard keys.contains(key) else {
                    throw ConfigError(
                        "\(where_): unknown key '\(key)'; a match takes " + keys.joined(separator: ", "))
                }
                var text = try matchMember(field, at: "\(where_).\(key)")
                if key == "name", let name = text { text = try DeviceName.check(name, at: "\(where_).name") }
                if usbIDs.contains(key) {
                    text = try text.map { (id: String) throws(ConfigError) in try usbID(id, at: "\(where_).\(key)") }
                }
                rule[key] = text
            }
            guard identifying.contains(where: { rule[$0] != nil }) else {
                throw ConfigError(
                    "\(where_): a match needs at least one of " + identifying.joined(separator: ", "))
            }
            rules.append(rule)
        }
        return rules
    }

    /// One member of a device match rule (`hid.match`, `serial.match`): a string, or null for "any".
    public static func matchMember(_ value: JSONValue, at origin: String) throws(ConfigError) -> String? {
        if value.isNull { return nil }
        guard let text = value.stringValue else {
            throw ConfigError("\(origin): expected a string or null, got \(value.typeName)")
        }
        return text
    }

    /// A USB vendor or product id as udev writes it: 4 hex digits, lower case (`05E0` is `05e0`).
    public static func usbID(_ text: String, at origin: String) throws(ConfigError) -> String {
        let lower = text.lowercased()
        guard lower.utf8.count == 4, lower.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else { throw ConfigError("\(origin): expected 4 hex digits like \"05e0\", got \"\(text.prefix(16))\"") }
        return lower
    }

    /// A key with its own JSON shape, read by `parse`.
    public static func structured<Value>(
        _ path: String, _ kind: Kind, _ field: Field<Value>,
        _ parse: @escaping @Sendable (JSONValue, String) throws(ConfigError) -> Value
    ) -> Key {
        Key(path: path, kind: kind) {
            (config: inout BridgeConfig, value: JSONValue, origin: String) throws(ConfigError) in
            config[keyPath: field] = try parse(value, origin)
        }
    }

    /// Environment variables that are not config keys but are ours all the same.
    public static let reservedEnvironment: Set<String> = ["PLINGS_BRIDGE_API_TOKEN", "PLINGS_BRIDGE_CONFIG"]

    /// The variable for a key: `api.tokenFile` -> `PLINGS_BRIDGE_API_TOKEN_FILE`.
    public static func environmentName(for path: String) -> String {
        var name = "PLINGS_BRIDGE_"
        for scalar in path.unicodeScalars {
            if scalar == "." {
                name += "_"
            } else if ("A"..."Z").contains(scalar) {
                name += "_" + String(scalar)
            } else {
                name += String(scalar).uppercased()
            }
        }
        return name
    }

    public private(set) var config = BridgeConfig()
    /// Every key this loader knows: the core ones, then each registered section's.
    public let schema: [Key]
    private let keys: [String: Key]
    private let sections: [any ConfigSection.Type]

    /// A loader for the core keys and those of `sections` (the bridge passes its registry's, `ConfigRegistry`).
    public init(sections: [any ConfigSection.Type] = []) {
        self.sections = sections
        schema = ConfigLoader.coreSchema + sections.flatMap { $0.keys }
        keys = Dictionary(uniqueKeysWithValues: schema.map { ($0.path, $0) })
    }

    /// Runs every registered section's checks across its keys (after all layers are applied).
    public func validateSections() throws(ConfigError) {
        for section in sections { try section.validate(config) }
        try DeviceName.checkUnique(sections.flatMap { $0.deviceNames(config) })
    }

    /// Applies a JSON config file's text. `origin` (the file path) appears in errors.
    public mutating func applyFile(_ text: [UInt8], origin: String) throws(ConfigError) {
        let json: JSONValue
        do {
            json = try JSONParser.parse(text)
        } catch {
            throw ConfigError("config file \(origin): \(error)")
        }
        guard case .object = json else { throw ConfigError("config file \(origin): the top level must be an object") }
        try walk(json, prefix: "", origin: origin)
    }

    private mutating func walk(_ value: JSONValue, prefix: String, origin: String) throws(ConfigError) {
        guard case .object(let members) = value else { return }
        var seen = Set<String>()
        for (key, child) in members {
            let path = prefix.isEmpty ? key : prefix + "." + key
            guard seen.insert(key).inserted else {
                throw ConfigError("config key '\(path)' appears twice in \(origin)")
            }
            if let key = keys[path] {
                try key.store(&config, child, "config key '\(path)' in \(origin)")
            } else if schema.contains(where: { $0.path.hasPrefix(path + ".") }) {
                guard case .object = child else {
                    throw ConfigError("config key '\(path)' in \(origin): expected an object, got \(child.typeName)")
                }
                try walk(child, prefix: path, origin: origin)
            } else {
                throw ConfigError(
                    "unknown config key '\(path)' in \(origin)"
                        + (suggestion(for: path).map { "; did you mean '\($0)'?" }
                            ?? "; docs/configuration.md lists every key"))
            }
        }
    }

    /// The known key or section closest to a mistyped `path` (at most two edits away, same parent), for the
    /// error's fix: `api.tiemout` -> `api.timeout`.
    func suggestion(for path: String) -> String? {
        let parent = path.split(separator: ".").dropLast().joined(separator: ".")
        var candidates = Set<String>()
        for key in schema {
            // Every key and every section on the way to it (`nfc.feedback` as well as `nfc.feedback.enabled`).
            let parts = key.path.split(separator: ".")
            for end in 1...parts.count {
                let candidate = parts[..<end].joined(separator: ".")
                if candidate.split(separator: ".").dropLast().joined(separator: ".") == parent {
                    candidates.insert(candidate)
                }
            }
        }
        let scored = candidates.map {
            (candidate: $0, distance: ConfigLoader.editDistance($0.lowercased(), path.lowercased()))
        }
        // At most two edits, and fewer than half the mistyped name: `a` is not a typo of `api`.
        let typed = path.split(separator: ".").last.map(String.init) ?? path
        guard let best = scored.min(by: { ($0.distance, $0.candidate) < ($1.distance, $1.candidate) }),
            best.distance <= 2, best.distance * 2 < typed.count
        else { return nil }
        return best.candidate
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }

    /// Applies `PLINGS_BRIDGE_*` variables; an unknown one is an error that names it.
    public mutating func applyEnvironment(_ environment: [String: String]) throws(ConfigError) {
        let byName = Dictionary(
            uniqueKeysWithValues: schema.map { (ConfigLoader.environmentName(for: $0.path), $0) })
        for name in environment.keys.sorted() where name.hasPrefix("PLINGS_BRIDGE_") {
            if ConfigLoader.reservedEnvironment.contains(name) { continue }
            guard let key = byName[name], let text = environment[name] else {
                throw ConfigError("unknown environment variable \(name)")
            }
            try setText(key, text: text, origin: "environment variable \(name)")
        }
    }

    /// Applies one flag's value to a key, e.g. `--gpsd 127.0.0.1:2948` to `location.gpsd`.
    public mutating func applyFlag(_ flag: String, path: String, text: String) throws(ConfigError) {
        guard let key = keys[path] else { throw ConfigError("internal: flag \(flag) maps to no key") }
        try setText(key, text: text, origin: "flag \(flag)")
    }

    /// Applies a flag that sets a key to a JSON value (`--no-nfc` sets `nfc.enabled` to false).
    public mutating func applyFlag(_ flag: String, path: String, value: JSONValue) throws(ConfigError) {
        guard let key = keys[path] else { throw ConfigError("internal: flag \(flag) maps to no key") }
        try key.store(&config, value, "flag \(flag)")
    }

    /// Converts text (environment or flag) to a JSON value of the key's type, then sets it.
    private mutating func setText(_ key: Key, text: String, origin: String) throws(ConfigError) {
        let value: JSONValue
        switch key.kind {
        case .bool:
            switch text.lowercased() {
            case "1", "true", "yes", "on": value = .bool(true)
            case "0", "false", "no", "off": value = .bool(false)
            default: throw ConfigError("\(origin): expected true or false, got '\(text.prefix(64))'")
            }
        case .number, .integer:
            if let i = Int(text) {
                value = .integer(i)
            } else if let d = Double(text), d.isFinite {
                value = .number(d)
            } else {
                throw ConfigError("\(origin): expected a number, got '\(text.prefix(64))'")
            }
        case .string, .choice, .textForm: value = .string(text)
        case .optionalString: value = text.isEmpty ? .null : .string(text)
        case .stringList:
            value = .array(text.split(separator: ",").map { .string(String($0).trimmingASCIIWhitespace()) })
        case .fixedLocation:
            let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
                Double(String($0).trimmingASCIIWhitespace())
            }
            guard parts.count == 2 || parts.count == 3, let lat = parts[0], let lon = parts[1] else {
                throw ConfigError("\(origin): expected LAT,LON[,ACCURACY], got '\(text.prefix(64))'")
            }
            var members: [(String, JSONValue)] = [("latitude", .number(lat)), ("longitude", .number(lon))]
            if parts.count == 3 {
                guard let accuracy = parts[2] else {
                    throw ConfigError("\(origin): expected LAT,LON[,ACCURACY], got '\(text.prefix(64))'")
                }
                members.append(("accuracy", .number(accuracy)))
            }
            value = .object(members)
        case .fileOnly(let what):
            throw ConfigError("\(origin): \(what) can only be set in the config file")
        }
        try key.store(&config, value, origin)
    }

    /// `location.fixed`: `{"latitude": .., "longitude": .., "accuracy": ..}`, or null for none.
    static func fixedLocation(_ value: JSONValue, origin: String) throws(ConfigError) -> LocationFix? {
        if value.isNull { return nil }
        guard case .object(let members) = value else {
            throw ConfigError("\(origin): expected an object with latitude and longitude, got \(value.typeName)")
        }
        for (key, _) in members where !["latitude", "longitude", "accuracy"].contains(key) {
            throw ConfigError("\(origin): unknown key '\(key)'")
        }
        guard let lat = value["latitude"]?.doubleValue, abs(lat) <= 90 else {
            throw ConfigError(
                "\(origin): location.fixed.latitude \(given(value["latitude"])); it must be a number of degrees in "
                    + "-90...90 (north positive, south negative)")
        }
        guard let lon = value["longitude"]?.doubleValue, abs(lon) <= 180 else {
            throw ConfigError(
                "\(origin): location.fixed.longitude \(given(value["longitude"])); it must be a number of degrees "
                    + "in -180...180 (east positive, west negative)")
        }
        var accuracy: Double?
        if let acc = value["accuracy"], !acc.isNull {
            guard let a = acc.doubleValue, a >= 0, a.isFinite else {
                throw ConfigError("\(origin): 'accuracy' must be a number of metres >= 0")
            }
            accuracy = a
        }
        return LocationFix(latitude: lat, longitude: lon, accuracy: accuracy)
    }

    /// "is 95", "is missing", "is a string": the value an error refers to, in words.
    static func given(_ value: JSONValue?) -> String {
        guard let value else { return "is missing" }
        if value.doubleValue != nil { return "is \(value.encoded())" }
        return "is \(value.typeName)"
    }
}

/// `HOST:PORT` (IPv6 as `[::1]:2947`).
public struct HostPort: Sendable, Equatable {
    public var host: String
    public var port: Int

    public static func parse(_ text: String) -> HostPort? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        guard let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, !host.contains(" ") else { return nil }
        return HostPort(host: host, port: port)
    }
}
