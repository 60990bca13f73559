import BridgeCore

/// A usage error: the CLI prints it with a hint and exits 2.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// Minimal `--flag value` parsing: the toolchain offers no argument parser and outside packages are not
/// available, so each command declares the flags it accepts and anything else is a usage error naming it.
struct Arguments {
    /// Flags that take a value, and flags that are switches.
    let valued: Set<String>
    let switches: Set<String>
    private(set) var values: [(flag: String, value: String)] = []
    private(set) var set: Set<String> = []
    private(set) var positional: [String] = []

    init(_ args: ArraySlice<String>, valued: Set<String>, switches: Set<String>) throws(UsageError) {
        self.valued = valued
        self.switches = switches.union(["--help", "-h", "--json"])
        var iterator = args.makeIterator()
        var onlyPositional = false
        while let arg = iterator.next() {
            if onlyPositional || !arg.hasPrefix("-") || arg == "-" {
                positional.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositional = true
                continue
            }
            var name = arg
            var inline: String?
            if let eq = arg.firstIndex(of: "="), arg.hasPrefix("--") {
                name = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            if valued.contains(name) {
                guard let value = inline ?? iterator.next() else { throw UsageError("\(name) needs a value") }
                values.append((name, value))
                set.insert(name)
            } else if self.switches.contains(name), inline == nil {
                set.insert(name)
            } else {
                throw UsageError("unknown option \(name)")
            }
        }
    }

    func has(_ flag: String) -> Bool { set.contains(flag) }
    /// The last value given for `flag`.
    func value(_ flag: String) -> String? { values.last(where: { $0.flag == flag })?.value }
    var wantsHelp: Bool { has("--help") || has("-h") }
    var json: Bool { has("--json") }
}
