import BridgeTestSupport
import Foundation
import Testing

/// Each command is described once (name, flags with their help, handler): `--help`, the command list and the parser
/// come from that one description. Checked against the real executable and against docs/contracts.md,
/// "Command line" (the contract, written independently of the code).
@Suite struct CommandTableTests {
    let binary = Products.path("plings-bridge")

    func run(_ args: [String]) throws -> ProcessResult {
        let env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PLINGS_BRIDGE_") }
        return try ProcessRunner.run(binary, args, environment: env, timeout: 30)
    }

    /// docs/contracts.md's "Command line" section, up to its `--json` shapes.
    func contract() throws -> String {
        let text = try String(
            contentsOf: Products.packageRoot.appendingPathComponent("docs/contracts.md"), encoding: .utf8)
        let start = try #require(text.range(of: "## Command line"))
        let end = try #require(text.range(of: "### `--json` shapes", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    /// The commands of the contract's table: the first word of each row's first cell.
    func documentedCommands() throws -> [String: String] {
        var rows: [String: String] = [:]
        for row in try contract().split(separator: "\n") where row.hasPrefix("| `") {
            let line = row.replacingOccurrences(of: "\\|", with: "/")
            let cell = line.dropFirst(3).prefix { $0 != "|" }
            let name = String(cell.prefix { $0 != " " && $0 != "`" })
            rows[name, default: ""] += String(cell)
        }
        return rows
    }

    /// The commands `plings-bridge --help` lists: the first word of each row under "Commands:".
    func listedCommands() throws -> [String] {
        let help = try run(["--help"])
        #expect(help.status == 0)
        let section = help.stdout.components(separatedBy: "Commands:\n").last?.components(separatedBy: "\n\n").first
        return (section ?? "").split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .map { String($0.dropFirst(2).prefix { $0 != " " }) }
    }

    /// The flags a help text describes (rows `  --flag VALUE   text` or `  -h, --help   text`), with whether each
    /// takes a value.
    static func describedFlags(_ help: String) -> [String: Bool] {
        var flags: [String: Bool] = [:]
        for line in help.split(separator: "\n") where line.hasPrefix("  -") {
            let words = line.dropFirst(2).split(separator: " ", omittingEmptySubsequences: false)
            var index = 0
            while index < words.count, words[index].hasPrefix("-") {
                let name = String(words[index].trimmingCharacters(in: CharacterSet(charactersIn: ",")))
                let valued = index + 1 < words.count && !words[index + 1].isEmpty && !words[index].hasSuffix(",")
                flags[name] = valued
                index += words[index].hasSuffix(",") ? 1 : words.count
            }
        }
        return flags
    }

    @Test func everyCommandIsListedInTheHelpAndHasItsOwn() throws {
        let listed = try listedCommands()
        #expect(Set(listed) == Set(try documentedCommands().keys).union(["help"]), "\(listed)")
        for name in listed {
            // `help --help` is the main help, as `help` with anything it does not know.
            for args in [[name, "--help"], ["help", name]] where args != ["help", "--help"] {
                let help = try run(args)
                #expect(help.status == 0, "\(args)")
                #expect(help.stdout.hasPrefix("Usage: plings-bridge \(name)"), "\(args): \(help.stdout)")
            }
        }
        // No command: the main help, exit 2 (docs/contracts.md).
        let none = try run([])
        #expect(none.status == 2 && none.stdout.contains("Commands:"))
    }

    /// The parser accepts exactly the flags a command's help describes: each described flag parses (`--help` then
    /// answers, exit 0); every other flag any help or the contract names is an unknown option (exit 2).
    @Test func everyFlagACommandAcceptsIsDescribedInItsHelp() throws {
        let contract = try contract()
        var helps: [String: String] = [:]
        var universe: Set<String> = []
        for name in try listedCommands() where name != "help" {
            helps[name] = try run([name, "--help"]).stdout
            universe.formUnion(Self.describedFlags(helps[name] ?? "").keys)
        }
        let mentioned = try NSRegularExpression(pattern: "--[a-z][a-z0-9-]*")
        for match in mentioned.matches(in: contract, range: NSRange(contract.startIndex..., in: contract)) {
            universe.insert(String(contract[Range(match.range, in: contract)!]))
        }
        #expect(universe.count > 25, "\(universe.sorted())")
        for (name, help) in helps {
            let described = Self.describedFlags(help)
            #expect(described.keys.contains("--json") && described.keys.contains("-h"), "\(name)")
            for flag in universe.union(described.keys).sorted() {
                if let valued = described[flag] {
                    let result = try run([name, flag] + (valued ? ["x"] : []) + ["--help"])
                    #expect(result.status == 0, "\(name) \(flag): \(result.stderr)")
                    #expect(result.stdout == help, "\(name) \(flag)")
                } else {
                    let result = try run([name, flag, "--help"])
                    #expect(result.status == 2, "\(name) \(flag) is accepted but not in its help")
                    #expect(result.stderr.contains("unknown option \(flag)"), "\(name) \(flag): \(result.stderr)")
                }
            }
        }
        // What the contract promises each command takes is in its help.
        let common = ["--config", "--spool", "--log-level", "--json", "--help"]
        let source = [
            "--api-url", "--api-token-file", "--gpsd", "--fixed-location", "--no-location", "--no-nfc", "--no-hid",
        ]
        for (name, row) in try documentedCommands() {
            let help = Self.describedFlags(helps[name] ?? "")
            var promised = common + (["run", "scan", "doctor"].contains(name) ? source : [])
            for match in mentioned.matches(in: row, range: NSRange(row.startIndex..., in: row)) {
                promised.append(String(row[Range(match.range, in: row)!]))
            }
            for flag in promised { #expect(help[flag] != nil, "\(name): \(flag) is promised but not in its help") }
        }
    }

    /// An unknown flag is a usage error naming it, with the command's help as the hint: exit 2, nothing done.
    @Test func anUnknownFlagIsAClearUsageError() throws {
        for name in try listedCommands() where name != "help" {
            let result = try run([name, "--frobnicate"])
            #expect(result.status == 2, "\(name)")
            #expect(result.stdout.isEmpty, "\(name): \(result.stdout)")
            #expect(
                result.stderr.contains(#"msg="unknown option --frobnicate" hint="plings-bridge \#(name) --help""#),
                "\(name): \(result.stderr)")
        }
        let command = try run(["frobnicate"])
        #expect(command.status == 2 && command.stderr.contains("unknown command 'frobnicate'"))
    }
}
