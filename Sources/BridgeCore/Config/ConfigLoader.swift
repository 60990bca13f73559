/// A configuration problem, naming the key, variable or flag at fault (the CLI exits 2 with it).
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Builds a `BridgeConfig` from the three layers of docs/contracts.md, "Configuration": JSON file, then
/// `PLINGS_BRIDGE_*` environment, then command-line flags; later wins.
///
/// Every layer is checked against one schema (`ConfigLoader.schema`), so a key is spelled, typed and bounded in
/// exactly one place and every error names where the bad value came from.
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
        case scannerMatches
        case readerProfiles
        case feedbackPattern
    }

    /// Every key, by dotted path. Objects are implied by the paths.
    public static let schema: [(path: String, kind: Kind)] = [
        ("api.url", .optionalString),
        ("api.tokenFile", .optionalString),
        ("api.document", .string),
        ("api.timeout", .number(min: 0.1, max: 600)),
        ("api.concurrency", .integer(min: 1, max: 64)),
        ("api.allowInsecureHTTP", .bool),
        ("spool.path", .optionalString),
        ("spool.synchronous", .choice(BridgeConfig.Synchronous.allCases.map(\.rawValue))),
        ("spool.deliveredRetention", .number(min: 0, max: 10 * 365 * 86_400)),
        ("nfc.enabled", .bool),
        ("nfc.readers", .stringList),
        ("nfc.debounce", .number(min: 0, max: 3600)),
        ("nfc.profiles", .readerProfiles),
        ("nfc.feedback.enabled", .bool),
        ("nfc.feedback.accepted", .feedbackPattern),
        ("nfc.feedback.unrecognized", .feedbackPattern),
        ("nfc.feedback.failed", .feedbackPattern),
        ("nfc.silenceDetectBeep", .bool),
        ("hid.enabled", .bool),
        ("hid.grab", .bool),
        ("hid.layout", .string),
        ("hid.variant", .optionalString),
        ("hid.suffix", .choice(BridgeConfig.HID.Suffix.allCases.map(\.rawValue))),
        ("hid.maxLineLength", .integer(min: 1, max: 65_536)),
        ("hid.interKeyTimeout", .number(min: 0.01, max: 60)),
        ("hid.debounce", .number(min: 0, max: 3600)),
        ("hid.match", .scannerMatches),
        ("location.enabled", .bool),
        ("location.gpsd", .string),
        ("location.maxFixAge", .number(min: 0.1, max: 86_400)),
        ("location.minMode", .integer(min: 2, max: 3)),
        ("location.fixed", .fixedLocation),
        ("location.timeFromGPS", .bool),
        ("metrics.textfile", .optionalString),
        ("metrics.interval", .number(min: 1, max: 3600)),
        ("mqtt.url", .optionalString),
        ("mqtt.allowInsecure", .bool),
        ("mqtt.site", .string),
        ("mqtt.deviceId", .optionalString),
        ("mqtt.topicPrefix", .string),
        ("mqtt.usernameFile", .optionalString),
        ("mqtt.passwordFile", .optionalString),
        ("mqtt.caFile", .optionalString),
        ("mqtt.certFile", .optionalString),
        ("mqtt.keyFile", .optionalString),
        ("mqtt.keepalive", .integer(min: 5, max: 3600)),
        ("mqtt.maxInflight", .integer(min: 1, max: 65_535)),
        ("hosts", .stringList),
    ]

    static let kinds: [String: Kind] = Dictionary(uniqueKeysWithValues: schema.map { ($0.path, $0.kind) })

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

    public init() {}

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
            if let kind = ConfigLoader.kinds[path] {
                try set(path, kind: kind, value: child, origin: "config key '\(path)' in \(origin)")
            } else if ConfigLoader.schema.contains(where: { $0.path.hasPrefix(path + ".") }) {
                guard case .object = child else {
                    throw ConfigError("config key '\(path)' in \(origin): expected an object, got \(child.typeName)")
                }
                try walk(child, prefix: path, origin: origin)
            } else {
                throw ConfigError("unknown config key '\(path)' in \(origin)")
            }
        }
    }

    /// Applies `PLINGS_BRIDGE_*` variables; an unknown one is an error that names it.
    public mutating func applyEnvironment(_ environment: [String: String]) throws(ConfigError) {
        let byName = Dictionary(
            uniqueKeysWithValues: ConfigLoader.schema.map { (ConfigLoader.environmentName(for: $0.path), $0) })
        for name in environment.keys.sorted() where name.hasPrefix("PLINGS_BRIDGE_") {
            if ConfigLoader.reservedEnvironment.contains(name) { continue }
            guard let (path, kind) = byName[name], let text = environment[name] else {
                throw ConfigError("unknown environment variable \(name)")
            }
            try setText(path, kind: kind, text: text, origin: "environment variable \(name)")
        }
    }

    /// Applies one flag's value to a key, e.g. `--gpsd 127.0.0.1:2948` to `location.gpsd`.
    public mutating func applyFlag(_ flag: String, path: String, text: String) throws(ConfigError) {
        guard let kind = ConfigLoader.kinds[path] else { throw ConfigError("internal: flag \(flag) maps to no key") }
        try setText(path, kind: kind, text: text, origin: "flag \(flag)")
    }

    /// Applies a flag that sets a key to a JSON value (`--no-nfc` sets `nfc.enabled` to false).
    public mutating func applyFlag(_ flag: String, path: String, value: JSONValue) throws(ConfigError) {
        guard let kind = ConfigLoader.kinds[path] else { throw ConfigError("internal: flag \(flag) maps to no key") }
        try set(path, kind: kind, value: value, origin: "flag \(flag)")
    }

    /// Converts text (environment or flag) to a JSON value of the key's type, then sets it.
    private mutating func setText(_ path: String, kind: Kind, text: String, origin: String) throws(ConfigError) {
        let value: JSONValue
        switch kind {
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
        case .string, .choice, .feedbackPattern: value = .string(text)
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
        case .scannerMatches:
            throw ConfigError("\(origin): scanner matches can only be set in the config file")
        case .readerProfiles:
            throw ConfigError("\(origin): reader profiles can only be set in the config file")
        }
        try set(path, kind: kind, value: value, origin: origin)
    }

    private mutating func set(_ path: String, kind: Kind, value: JSONValue, origin: String) throws(ConfigError) {
        func fail(_ expected: String) -> ConfigError {
            ConfigError("\(origin): expected \(expected), got \(value.typeName)")
        }
        switch kind {
        case .bool:
            guard let b = value.boolValue else { throw fail("true or false") }
            assign(path, bool: b)
        case .number(let min, let max):
            guard let d = value.doubleValue else { throw fail("a number of seconds") }
            guard d >= min && d <= max else { throw ConfigError("\(origin): \(d) is outside \(min)...\(max)") }
            assign(path, number: d)
        case .integer(let min, let max):
            guard case .integer(let i) = value else { throw fail("a whole number") }
            guard i >= min && i <= max else { throw ConfigError("\(origin): \(i) is outside \(min)...\(max)") }
            assign(path, integer: i)
        case .string:
            guard let s = value.stringValue, !s.isEmpty else { throw fail("a non-empty string") }
            try assign(path, string: s, origin: origin)
        case .optionalString:
            if value.isNull {
                try assign(path, string: nil, origin: origin)
            } else {
                guard let s = value.stringValue else { throw fail("a string or null") }
                try assign(path, string: s.isEmpty ? nil : s, origin: origin)
            }
        case .choice(let choices):
            guard let s = value.stringValue, choices.contains(s) else {
                throw ConfigError(
                    "\(origin): expected one of \(choices.joined(separator: ", ")), got \(value.encoded().prefix(64))")
            }
            try assign(path, string: s, origin: origin)
        case .stringList:
            guard case .array(let items) = value else { throw fail("an array of strings") }
            var strings: [String] = []
            for item in items {
                guard let s = item.stringValue, !s.isEmpty else {
                    throw ConfigError("\(origin): expected an array of non-empty strings, found \(item.typeName)")
                }
                strings.append(s)
            }
            assign(path, list: strings)
            if path == "hosts", strings.isEmpty { throw ConfigError("\(origin): at least one host is needed") }
        case .fixedLocation:
            if value.isNull {
                config.location.fixed = nil
                return
            }
            config.location.fixed = try ConfigLoader.fixedLocation(value, origin: origin)
        case .scannerMatches:
            config.hid.match = try ConfigLoader.scannerMatches(value, origin: origin)
        case .readerProfiles:
            config.nfc.profiles = try ConfigLoader.readerProfiles(value, origin: origin)
        case .feedbackPattern:
            guard let s = value.stringValue else { throw fail("a pattern string like \"green 1x100\"") }
            let pattern: FeedbackPattern
            switch FeedbackPattern.parse(s) {
            case .success(let parsed): pattern = parsed
            case .failure(let error): throw ConfigError("\(origin): \(error.message)")
            }
            switch path {
            case "nfc.feedback.accepted": config.nfc.feedback.accepted = pattern
            case "nfc.feedback.unrecognized": config.nfc.feedback.unrecognized = pattern
            default: config.nfc.feedback.failed = pattern
            }
        }
    }

    /// `nfc.profiles`: `[{"reader": "<substring of the PC/SC name>", "profile": "acr122u"}, ...]`.
    static func readerProfiles(_ value: JSONValue, origin: String) throws(ConfigError) -> [ReaderProfile.Rule] {
        guard case .array(let items) = value else { throw ConfigError("\(origin): expected an array of objects") }
        var rules: [ReaderProfile.Rule] = []
        let names = ReaderProfile.allCases.map(\.rawValue).joined(separator: ", ")
        for (index, item) in items.enumerated() {
            let where_ = "\(origin)[\(index)]"
            guard case .object(let members) = item else { throw ConfigError("\(where_): expected an object") }
            for (key, _) in members where key != "reader" && key != "profile" {
                throw ConfigError("\(where_): unknown key '\(key)'")
            }
            guard let reader = item["reader"]?.stringValue, !reader.isEmpty else {
                throw ConfigError("\(where_).reader: expected a non-empty substring of a reader name")
            }
            guard let text = item["profile"]?.stringValue, let profile = ReaderProfile(rawValue: text) else {
                throw ConfigError("\(where_).profile: expected one of \(names)")
            }
            rules.append(ReaderProfile.Rule(reader: reader, profile: profile))
        }
        return rules
    }

    static func fixedLocation(_ value: JSONValue, origin: String) throws(ConfigError) -> LocationFix {
        guard case .object(let members) = value else {
            throw ConfigError("\(origin): expected an object with latitude and longitude, got \(value.typeName)")
        }
        for (key, _) in members where !["latitude", "longitude", "accuracy"].contains(key) {
            throw ConfigError("\(origin): unknown key '\(key)'")
        }
        guard let lat = value["latitude"]?.doubleValue, abs(lat) <= 90 else {
            throw ConfigError("\(origin): 'latitude' must be a number in -90...90")
        }
        guard let lon = value["longitude"]?.doubleValue, abs(lon) <= 180 else {
            throw ConfigError("\(origin): 'longitude' must be a number in -180...180")
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

    static func scannerMatches(_ value: JSONValue, origin: String) throws(ConfigError) -> [BridgeConfig.HID.Match] {
        guard case .array(let items) = value else { throw ConfigError("\(origin): expected an array of objects") }
        var matches: [BridgeConfig.HID.Match] = []
        for (index, item) in items.enumerated() {
            let where_ = "\(origin)[\(index)]"
            guard case .object(let members) = item else { throw ConfigError("\(where_): expected an object") }
            var match = BridgeConfig.HID.Match()
            for (key, field) in members {
                var text: String?
                if !field.isNull {
                    guard let s = field.stringValue else {
                        throw ConfigError("\(where_).\(key): expected a string or null, got \(field.typeName)")
                    }
                    text = s
                }
                switch key {
                case "vendor", "model":
                    if let t = text {
                        let lower = t.lowercased()
                        guard lower.utf8.count == 4,
                            lower.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
                        else {
                            throw ConfigError(
                                "\(where_).\(key): expected 4 hex digits like \"05e0\", got \"\(t.prefix(16))\"")
                        }
                        text = lower
                    }
                    if key == "vendor" { match.vendor = text } else { match.model = text }
                case "serial": match.serial = text
                case "path": match.path = text
                case "layout": match.layout = text
                case "variant": match.variant = text
                default: throw ConfigError("\(where_): unknown key '\(key)'")
                }
            }
            guard match.vendor != nil || match.model != nil || match.serial != nil || match.path != nil else {
                throw ConfigError("\(where_): a match needs at least one of vendor, model, serial, path")
            }
            matches.append(match)
        }
        return matches
    }

    private mutating func assign(_ path: String, bool: Bool) {
        switch path {
        case "api.allowInsecureHTTP": config.api.allowInsecureHTTP = bool
        case "nfc.enabled": config.nfc.enabled = bool
        case "nfc.feedback.enabled": config.nfc.feedback.enabled = bool
        case "nfc.silenceDetectBeep": config.nfc.silenceDetectBeep = bool
        case "hid.enabled": config.hid.enabled = bool
        case "hid.grab": config.hid.grab = bool
        case "location.enabled": config.location.enabled = bool
        case "location.timeFromGPS": config.location.timeFromGPS = bool
        case "mqtt.allowInsecure": config.mqtt.allowInsecure = bool
        default: break
        }
    }

    private mutating func assign(_ path: String, number: Double) {
        switch path {
        case "api.timeout": config.api.timeout = number
        case "spool.deliveredRetention": config.spool.deliveredRetention = number
        case "nfc.debounce": config.nfc.debounce = number
        case "hid.interKeyTimeout": config.hid.interKeyTimeout = number
        case "hid.debounce": config.hid.debounce = number
        case "location.maxFixAge": config.location.maxFixAge = number
        case "metrics.interval": config.metrics.interval = number
        default: break
        }
    }

    private mutating func assign(_ path: String, integer: Int) {
        switch path {
        case "api.concurrency": config.api.concurrency = integer
        case "hid.maxLineLength": config.hid.maxLineLength = integer
        case "location.minMode": config.location.minMode = integer
        case "mqtt.keepalive": config.mqtt.keepalive = integer
        case "mqtt.maxInflight": config.mqtt.maxInflight = integer
        default: break
        }
    }

    private mutating func assign(_ path: String, string: String?, origin: String) throws(ConfigError) {
        switch path {
        case "api.url": config.api.url = string
        case "api.tokenFile": config.api.tokenFile = string
        case "api.document": config.api.document = string ?? GraphQLRequestBody.defaultDocument
        case "spool.path": config.spool.path = string
        case "spool.synchronous": config.spool.synchronous = string.flatMap(BridgeConfig.Synchronous.init) ?? .full
        case "hid.layout": config.hid.layout = string ?? "us"
        case "hid.variant": config.hid.variant = string
        case "hid.suffix": config.hid.suffix = string.flatMap(BridgeConfig.HID.Suffix.init) ?? .enter
        case "location.gpsd":
            guard let s = string, HostPort.parse(s) != nil else {
                throw ConfigError("\(origin): expected HOST:PORT, got '\((string ?? "").prefix(64))'")
            }
            config.location.gpsd = s
        case "metrics.textfile": config.metrics.textfile = string
        case "mqtt.url": config.mqtt.url = string
        case "mqtt.site", "mqtt.deviceId", "mqtt.topicPrefix":
            if let s = string, let problem = ConfigLoader.topicProblem(s, allowLevels: path == "mqtt.topicPrefix") {
                throw ConfigError("\(origin): \(problem)")
            }
            if path == "mqtt.site" { config.mqtt.site = string ?? "default" }
            if path == "mqtt.deviceId" { config.mqtt.deviceId = string }
            if path == "mqtt.topicPrefix" { config.mqtt.topicPrefix = string ?? "plings" }
        case "mqtt.usernameFile": config.mqtt.usernameFile = string
        case "mqtt.passwordFile": config.mqtt.passwordFile = string
        case "mqtt.caFile": config.mqtt.caFile = string
        case "mqtt.certFile": config.mqtt.certFile = string
        case "mqtt.keyFile": config.mqtt.keyFile = string
        default: break
        }
    }

    /// Why `text` cannot be part of an MQTT topic name (MQTT 3.1.1/5.0 section 4.7: no wildcards, no NUL; our own
    /// levels must not be empty or split further unless `allowLevels`), or nil.
    static func topicProblem(_ text: String, allowLevels: Bool) -> String? {
        if text.contains("+") || text.contains("#") || text.contains("\u{0}") {
            return "'\(text.prefix(64))' contains a wildcard (+ or #) or NUL, not allowed in an MQTT topic"
        }
        if !allowLevels, text.contains("/") { return "'\(text.prefix(64))' must be one topic level (no '/')" }
        if text.hasPrefix("/") || text.hasSuffix("/") || text.contains("//") {
            return "'\(text.prefix(64))' must not start or end with '/' or contain an empty level"
        }
        return nil
    }

    private mutating func assign(_ path: String, list: [String]) {
        switch path {
        case "nfc.readers": config.nfc.readers = list
        case "hosts": config.hosts = list.map { $0.lowercased() }
        default: break
        }
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
