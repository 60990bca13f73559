import BridgeTestSupport
import Bridge
import PlingsAPI
import HID
import NFC
import Testing

@testable import BridgeCore

struct ConfigTests {
    func load(_ json: String) throws(ConfigError) -> BridgeConfig {
        var loader = ConfigLoader(sections: ConfigRegistry.sections)
        try loader.applyFile(Array(json.utf8), origin: "test.json")
        return loader.config
    }

    func error(_ json: String) -> String? {
        do {
            _ = try load(json)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func defaultsMatchTheDesign() {
        let c = BridgeConfig()
        #expect(c.api.url == nil && c.api.timeout == 10 && c.api.concurrency == 4 && !c.api.allowInsecureHTTP)
        #expect(c.spool.synchronous == .full && c.spool.deliveredRetention == 604_800)
        #expect(c.nfc.enabled && c.nfc.readers.isEmpty && c.nfc.debounce == 2)
        #expect(c.hid.grab && c.hid.layout == "us" && c.hid.suffix == .enter && c.hid.maxLineLength == 4096)
        #expect(c.hid.interKeyTimeout == 0.5 && c.hid.debounce == 1.5)
        #expect(c.location.gpsd == "127.0.0.1:2947" && c.location.maxFixAge == 10 && c.location.minMode == 2)
        #expect(c.hosts == ["s.plings.io"])
    }

    @Test func fullDesignExampleLoads() throws {
        let c = try load(
            """
            { "api": { "url": "https://api.plings.io/graphql", "tokenFile": "/etc/plings-bridge/token",
                       "document": "mutation X { y }", "timeout": 10, "concurrency": 4, "allowInsecureHTTP": false },
              "spool": { "path": "/var/lib/x.sqlite", "synchronous": "full", "deliveredRetention": 604800 },
              "nfc": { "enabled": true, "readers": ["ACS*"], "debounce": 2 },
              "hid": { "enabled": true, "grab": true, "layout": "us", "suffix": "enter", "maxLineLength": 4096,
                       "interKeyTimeout": 0.5, "debounce": 1.5,
                       "match": [ { "vendor": "05E0", "model": "1200", "serial": null, "path": null, "layout": "se" } ] },
              "location": { "enabled": true, "gpsd": "127.0.0.1:2947", "maxFixAge": 10, "minMode": 2,
                            "fixed": { "latitude": 59.3293, "longitude": 18.0686, "accuracy": 5 } },
              "hosts": ["S.Plings.io", "q.example.org"] }
            """)
        #expect(c.api.url == "https://api.plings.io/graphql")
        #expect(c.api.document == "mutation X { y }")
        #expect(c.nfc.readers == ["ACS*"])
        #expect(c.hid.match == [.init(vendor: "05e0", model: "1200", layout: "se")])
        #expect(c.location.fixed == LocationFix(latitude: 59.3293, longitude: 18.0686, accuracy: 5))
        #expect(c.hosts == ["s.plings.io", "q.example.org"])
    }

    @Test(arguments: [
        (#"{"nfc":{"debouce":2}}"#, "unknown config key 'nfc.debouce' in test.json; did you mean 'nfc.debounce'?"),
        (
            #"{"nfc":{"debounce":"2"}}"#,
            "config key 'nfc.debounce' in test.json: expected a number of seconds, got a string"
        ),
        (#"{"nfc":{"enabled":1}}"#, "config key 'nfc.enabled' in test.json: expected true or false, got a number"),
        (
            #"{"api":{"concurrency":2.5}}"#,
            "config key 'api.concurrency' in test.json: expected a whole number, got a number"
        ),
        (#"{"api":{"concurrency":0}}"#, "config key 'api.concurrency' in test.json: 0 is outside 1...64"),
        (
            #"{"hid":{"suffix":"space"}}"#,
            #"config key 'hid.suffix' in test.json: expected one of enter, tab, got "space""#
        ),
        (#"{"nfc":[]}"#, "config key 'nfc' in test.json: expected an object, got an array"),
        (#"{"hosts":[]}"#, "config key 'hosts' in test.json: at least one host is needed"),
        (
            #"{"location":{"gpsd":"nohost"}}"#,
            "config key 'location.gpsd' in test.json: expected HOST:PORT, got 'nohost'"
        ),
        (
            #"{"location":{"fixed":{"latitude":91,"longitude":0}}}"#,
            "config key 'location.fixed' in test.json: location.fixed.latitude is 91; it must be a number of degrees in "
                + "-90...90 (north positive, south negative)"
        ),
        (
            #"{"hid":{"match":[{"vendor":"5e0"}]}}"#,
            #"config key 'hid.match' in test.json[0].vendor: expected 4 hex digits like "05e0", got "5e0""#
        ),
        (
            #"{"hid":{"match":[{"layout":"se"}]}}"#,
            "config key 'hid.match' in test.json[0]: a match needs at least one of vendor, model, serial, path"
        ),
        (#"{"a":1,"a":2}"#, "unknown config key 'a' in test.json; docs/configuration.md lists every key"),
        (#"{"nfc":{"debounce":1,"debounce":2}}"#, "config key 'nfc.debounce' appears twice in test.json"),
        ("[1]", "config file test.json: the top level must be an object"),
        ("{", "config file test.json: invalid JSON at byte 1: expected a string key"),
    ])
    func errorsNameTheKey(_ json: String, _ message: String) {
        #expect(error(json) == message)
    }

    @Test func environmentAndFlagsOverrideInOrder() throws {
        var loader = ConfigLoader(sections: ConfigRegistry.sections)
        try loader.applyFile(Array(#"{"nfc":{"debounce":5},"location":{"gpsd":"10.0.0.1:1"}}"#.utf8), origin: "f")
        try loader.applyEnvironment([
            "PLINGS_BRIDGE_NFC_DEBOUNCE": "3", "PLINGS_BRIDGE_LOCATION_GPSD": "127.0.0.1:2", "PATH": "/bin",
            "PLINGS_BRIDGE_API_TOKEN": "secret", "PLINGS_BRIDGE_HOSTS": "a.example, b.example",
            "PLINGS_BRIDGE_LOCATION_FIXED": "1.5,2.5,3",
        ])
        #expect(loader.config.nfc.debounce == 3)
        #expect(loader.config.hosts == ["a.example", "b.example"])
        #expect(loader.config.location.fixed == LocationFix(latitude: 1.5, longitude: 2.5, accuracy: 3))
        try loader.applyFlag("--gpsd", path: "location.gpsd", text: "127.0.0.1:3")
        try loader.applyFlag("--no-nfc", path: "nfc.enabled", value: .bool(false))
        #expect(loader.config.location.gpsd == "127.0.0.1:3")
        #expect(!loader.config.nfc.enabled)
    }

    @Test func environmentErrorsNameTheVariable() {
        var loader = ConfigLoader(sections: ConfigRegistry.sections)
        #expect(throws: ConfigError("unknown environment variable PLINGS_BRIDGE_NFC_DEBOUCE")) {
            try loader.applyEnvironment(["PLINGS_BRIDGE_NFC_DEBOUCE": "1"])
        }
        #expect(throws: ConfigError("environment variable PLINGS_BRIDGE_HID_GRAB: expected true or false, got 'maybe'"))
        {
            try loader.applyEnvironment(["PLINGS_BRIDGE_HID_GRAB": "maybe"])
        }
        #expect(throws: ConfigError("flag --fixed-location: expected LAT,LON[,ACCURACY], got '59.3'")) {
            try loader.applyFlag("--fixed-location", path: "location.fixed", text: "59.3")
        }
    }

    @Test func environmentNames() {
        #expect(ConfigLoader.environmentName(for: "api.tokenFile") == "PLINGS_BRIDGE_API_TOKEN_FILE")
        #expect(ConfigLoader.environmentName(for: "hid.interKeyTimeout") == "PLINGS_BRIDGE_HID_INTER_KEY_TIMEOUT")
        #expect(ConfigLoader.environmentName(for: "hosts") == "PLINGS_BRIDGE_HOSTS")
    }

    /// Random token sequences, and a valid config with a few tokens replaced, deleted or inserted: only a JSON
    /// object (RFC 8259's grammar decides) ever loads, and every refusal names where the bad value came from:
    /// the file, and for a JSON object the key (docs/contracts.md, "Configuration").
    @Test func randomConfigsLoadOrNameTheKey() {
        var rng = SeededRandom(seed: 7)
        func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let pieces = [
            "{", "}", "[", "]", ",", ":", "\"api\"", "\"nfc\"", "\"debounce\"", "\"hid\"", "\"match\"", "\"vendor\"",
            "1", "-1e400", "true", "null", "\"x\"", "\"location\"", "\"fixed\"", "\"latitude\"", "\"hosts\"",
        ]
        let valid = [
            "{", "\"api\"", ":", "{", "\"timeout\"", ":", "5", "}", ",", "\"nfc\"", ":", "{", "\"debounce\"", ":", "1",
            ",", "\"readers\"", ":", "[", "\"ACS*\"", "]", "}", ",", "\"hid\"", ":", "{", "\"match\"", ":", "[", "{",
            "\"vendor\"", ":", "\"05e0\"", "}", "]", "}", ",", "\"location\"", ":", "{", "\"fixed\"", ":", "{",
            "\"latitude\"", ":", "1", ",", "\"longitude\"", ":", "2", "}", "}", ",", "\"hosts\"", ":", "[", "\"x\"",
            "]", "}",
        ]
        var loaded = 0
        var refusedKeys = 0
        for round in 0..<5000 {
            var tokens: [String]
            if round % 2 == 0 {
                tokens = (0..<pick(24)).map { _ in pieces[pick(pieces.count)] }
            } else {
                tokens = valid
                for _ in 0..<pick(3) {
                    let at = pick(tokens.count)
                    switch pick(3) {
                    case 0: tokens[at] = pieces[pick(pieces.count)]
                    case 1: tokens.remove(at: at)
                    default: tokens.insert(pieces[pick(pieces.count)], at: at)
                    }
                }
            }
            let text = tokens.joined()
            let isObject = RFC8259Grammar.matches(Array(text.utf8)) && text.hasPrefix("{")
            var loader = ConfigLoader(sections: ConfigRegistry.sections)
            do throws(ConfigError) {
                try loader.applyFile(Array(text.utf8), origin: "fuzz")
                loaded += 1
                #expect(isObject, "loaded a config that is not a JSON object: \(text)")
            } catch {
                if !isObject {
                    #expect(error.message.hasPrefix("config file fuzz: "), "\(text): \(error.message)")
                } else if !error.message.hasSuffix("number out of range") {  // RFC 8259, section 9: a limit
                    refusedKeys += 1
                    #expect(error.message.contains("config key '"), "\(text): \(error.message)")
                }
            }
        }
        // Both answers were exercised: whole configs loaded, and JSON objects refused for a key.
        #expect(loaded > 100)
        #expect(refusedKeys > 50)
    }
}
