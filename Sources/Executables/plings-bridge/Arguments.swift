import BridgeCore

/// A usage error: the CLI prints it with a hint and exits 2.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// Minimal `--flag value` parsing against a command's description (`Command`): the toolchain offers no argument
/// parser and outside packages are not available. A flag the command does not describe is a usage error naming
/// it. `--flag=value` and `--flag value` are the same; `--` ends the flags.
struct Arguments {
    let command: Command
    private(set) var values: [(flag: String, value: String)] = []
    private(set) var set: Set<String> = []
    private(set) var positional: [String] = []

    init(_ args: ArraySlice<String>, for command: Command) throws(UsageError) {
        self.command = command
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
            guard let option = command.option(named: name) else { throw UsageError("unknown option \(name)") }
            if option.value != nil {
                guard let value = inline ?? iterator.next() else { throw UsageError("\(name) needs a value") }
                values.append((name, value))
                set.insert(name)
            } else if inline == nil {
                set.insert(name)
            } else {
                throw UsageError("unknown option \(name)")
            }
        }
    }

    func has(_ flag: String) -> Bool { set.contains(flag) }
    /// The last value given for `flag`.
    func value(_ flag: String) -> String? { values.last(where: { $0.flag == flag })?.value }
    /// The whole number from 1 given for `flag` (`--count`), nil when the flag is absent.
    func positiveNumber(_ flag: String) throws -> Int? {
        try value(flag).map { text in
            guard let n = Int(text), n > 0 else { throw CommandFailure.usage("\(flag) must be a positive number") }
            return n
        }
    }
    var wantsHelp: Bool { has("--help") || has("-h") }
    var json: Bool { has("--json") }

    /// The flags that set configuration keys, as `Settings.load` takes them: valued ones in command-line order,
    /// then the switches.
    var configFlags: [(flag: String, path: String, value: JSONValue)] {
        var flags: [(flag: String, path: String, value: JSONValue)] = []
        for (flag, value) in values {
            if case .key(let path)? = command.option(named: flag)?.setting {
                flags.append((flag, path, .string(value)))
            }
        }
        for option in command.options {
            guard case .disables(let path) = option.setting else { continue }
            for name in option.names where has(name) { flags.append((name, path, .bool(false))) }
        }
        return flags
    }
}
