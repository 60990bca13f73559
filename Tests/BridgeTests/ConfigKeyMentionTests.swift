import Bridge
import Foundation
import Testing

@testable import BridgeCore

/// Every configuration key the product names to a person (an error, a log line, a `doctor` fix, a flag's help, the
/// flag table's `sets: .key(...)`) is a key the loader declares. Messages keep their key paths as plain text, so the
/// line an operator reads can be found in the source as written; this test is what ties each of them to the key's
/// declaration: a key renamed or removed in its section's table fails here, with every place that still names it.
struct ConfigKeyMentionTests {
    /// The text of every string literal in Swift `source` (interpolations left out), with the line it starts on.
    /// Comments are skipped: they may describe history.
    static func stringLiterals(_ source: String) -> [(line: Int, text: String)] {
        let s = Array(source.unicodeScalars)
        var literals: [(line: Int, text: String)] = []
        var i = 0
        var line = 1
        func starts(_ text: String, at k: Int) -> Bool {
            let t = Array(text.unicodeScalars)
            return k + t.count <= s.count && Array(s[k..<k + t.count]) == t
        }
        while i < s.count {
            if s[i] == "\n" {
                line += 1
                i += 1
            } else if starts("//", at: i) {
                while i < s.count, s[i] != "\n" { i += 1 }
            } else if starts("/*", at: i) {
                i += 2
                while i < s.count, !starts("*/", at: i) {
                    if s[i] == "\n" { line += 1 }
                    i += 1
                }
                i += 2
            } else {
                var j = i
                while j < s.count, s[j] == "#" { j += 1 }
                let hashes = String(repeating: "#", count: j - i)
                guard j < s.count, s[j] == "\"" else {
                    i = max(j, i + 1)
                    continue
                }
                let quote = starts("\"\"\"", at: j) ? "\"\"\"" : "\""
                let (close, escape) = (quote + hashes, "\\" + hashes)
                let startLine = line
                var text = ""
                var k = j + quote.unicodeScalars.count
                while k < s.count, !starts(close, at: k) {
                    if starts(escape, at: k) {
                        k += escape.unicodeScalars.count
                        if k < s.count, s[k] == "(" {
                            // An interpolation is code: skipped to its closing parenthesis.
                            var depth = 0
                            repeat {
                                if s[k] == "(" { depth += 1 } else if s[k] == ")" { depth -= 1 }
                                if s[k] == "\n" { line += 1 }
                                k += 1
                            } while k < s.count && depth > 0
                            text += " "
                        } else {
                            k += 1
                        }
                        continue
                    }
                    if s[k] == "\n" { line += 1 }
                    text.unicodeScalars.append(s[k])
                    k += 1
                }
                literals.append((startLine, text))
                i = k + close.unicodeScalars.count
            }
        }
        return literals
    }

    /// The key paths a text names: a section's name, a dot and a key (`api.url`, `hid.match[0].layout`,
    /// `nfc.feedback.accepted`), not part of a path, a host name or a longer word.
    static func mentions(in text: String, sections: Set<String>) -> [String] {
        let pattern =
            #"(?<![\w./@:-])([a-z]+)((?:\.[A-Za-z][A-Za-z0-9]*(?:\[[^\]]*\])?)+)(?![\w/-]|\.[A-Za-z0-9])"#
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        let range = NSRange(text.startIndex..., in: text)
        return regex.matches(in: text, range: range).compactMap { match in
            guard let section = Range(match.range(at: 1), in: text).map({ String(text[$0]) }),
                sections.contains(section), let whole = Range(match.range, in: text)
            else { return nil }
            return String(text[whole])
        }
    }

    /// Whether `mention` names a declared key: the key itself, a group of keys (`nfc.feedback`), a field of one
    /// entry of a key that holds a list of rules (`hid.match[0].layout`), or a field of a key that holds a
    /// structure (`location.fixed.latitude`; `structured` lists those keys).
    static func names(_ mention: String, oneOf keys: Set<String>, structured: Set<String> = []) -> Bool {
        if let bracket = mention.firstIndex(of: "[") { return keys.contains(String(mention[..<bracket])) }
        if let dot = mention.lastIndex(of: "."), structured.contains(String(mention[..<dot])) { return true }
        return keys.contains(mention) || keys.contains { $0.hasPrefix(mention + ".") }
    }

    @Test func everyKeyTheProductNamesIsDeclared() throws {
        let schema = ConfigLoader(sections: ConfigRegistry.sections).schema
        let keys = Set(schema.map(\.path))
        let structured = Set(
            schema.filter {
                switch $0.kind {
                case .fixedLocation, .fileOnly: return true
                default: return false
                }
            }.map(\.path))
        let sections = Set(keys.map { String($0.split(separator: ".")[0]) })
        // Text that reads like a key and is not one: the spool's file name; the bench page's script reading a scan's
        // JSON fields (`location.fix`, `location.source`) and reloading itself (`location.reload`).
        let notKeys: Set<String> = ["spool.sqlite", "location.fix", "location.source", "location.reload"]
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let sources = root.appending(path: "Sources")
        let files =
            FileManager.default.enumerator(atPath: sources.path())?.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") && !$0.hasPrefix("TestSupport/") } ?? []
        #expect(files.count > 100, "\(files.count) Swift files under \(sources.path())")
        var named = 0
        var unknown: [String] = []
        for file in files.sorted() {
            let source = try String(contentsOf: sources.appending(path: file), encoding: .utf8)
            for (line, text) in Self.stringLiterals(source) {
                for mention in Self.mentions(in: text, sections: sections) where !notKeys.contains(mention) {
                    named += 1
                    if !Self.names(mention, oneOf: keys, structured: structured) {
                        unknown.append("Sources/\(file):\(line): \(mention)")
                    }
                }
            }
        }
        #expect(unknown.isEmpty, "named but not declared:\n\(unknown.joined(separator: "\n"))")
        // The product names keys in well over a hundred places: a scanner that finds few is broken.
        #expect(named > 100, "only \(named) key mentions found")
    }

    /// The scanner itself, on text whose answer is known.
    @Test func theScannerFindsKeysInStringsOnly() {
        let source = ##"""
            // api.gone in a comment
            let a = "api.url must be https; use api.tokenFile"
            let b = "\(x.y) hid.match[\(i)].layout and https://api.example.org/graphql"
            let c = #"raw "nfc.names" \#(n) mqtt.url"#
            let d = """
                spool.path and a.b
                """
            let e = config.api.url
            """##
        let literals = Self.stringLiterals(source).map(\.text)
        let sections: Set<String> = ["api", "hid", "nfc", "mqtt", "spool"]
        let found = literals.flatMap { Self.mentions(in: $0, sections: sections) }
        #expect(found == ["api.url", "api.tokenFile", "hid.match[ ].layout", "nfc.names", "mqtt.url", "spool.path"])
        let keys: Set<String> = ["api.url", "hid.match", "location.fixed.latitude"]
        #expect(Self.names("hid.match[0].layout", oneOf: keys) && Self.names("location.fixed", oneOf: keys))
        #expect(!Self.names("api.urls", oneOf: keys) && !Self.names("api.url.x", oneOf: keys))
        #expect(Self.names("location.fixed.accuracy", oneOf: ["location.fixed"], structured: ["location.fixed"]))
    }
}
