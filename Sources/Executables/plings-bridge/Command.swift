/// One flag a command accepts, described once: the parser, the help and the configuration layer all read it.
struct Option: Sendable {
    /// What giving the flag does to the configuration (docs/contracts.md, "Configuration": flags are the last layer).
    enum Setting: Sendable {
        /// Nothing by itself: the command reads the flag.
        case none
        /// Its value sets this key, in command-line order.
        case key(String)
        /// The switch sets this boolean key to false (`--no-nfc`).
        case disables(String)
    }

    /// The spellings, e.g. `["-h", "--help"]`.
    let names: [String]
    /// The value's placeholder in help (`PATH`); nil for a switch.
    let value: String?
    /// What it does; `\n` starts a continuation line.
    let help: String
    let setting: Setting
    /// For a command with subcommands (`spool`): the ones that take this flag; empty for all. Its help starts with
    /// them, and the flag given to another subcommand is a usage error rather than silently ignored.
    let subcommands: [String]

    init(
        _ name: String, short: String? = nil, value: String? = nil, _ help: String, sets setting: Setting = .none,
        for subcommands: [String] = []
    ) {
        self.names = (short.map { [$0] } ?? []) + [name]
        self.value = value
        self.help = subcommands.isEmpty ? help : subcommands.joined(separator: ", ") + ": " + help
        self.setting = setting
        self.subcommands = subcommands
    }

    /// The configuration key this flag feeds, if any.
    var configKey: String? {
        switch setting {
        case .none: nil
        case .key(let key), .disables(let key): key
        }
    }
}

/// Options shown under one heading of a command's help.
struct OptionGroup: Sendable {
    let title: String
    let options: [Option]
}

/// One command, described once: its name, what it does, its flags with their help, and its handler. `--help`,
/// the main usage text, the parser (`Arguments`) and dispatch (`CLI.main`) all come from this value, so they
/// cannot drift apart (the shape of swift-argument-parser's one description per command, which this build cannot
/// fetch).
struct Command: Sendable {
    /// How the command is run.
    enum Handler: Sendable {
        /// With its flags parsed against `options` (unknown flags are usage errors).
        case parsed(@Sendable (CLI, Arguments) throws -> Int32)
        /// With the words after its name as they are (`help`, which takes anything and always answers).
        case raw(@Sendable (CLI, ArraySlice<String>) -> Int32)
    }

    let name: String
    /// The command with its arguments, as the command list shows it (`scan TEXT`).
    let synopsis: String
    /// One line for the command list.
    let summary: String
    /// The usage lines after `plings-bridge `.
    let usage: [String]
    /// What the command does, for its help (may be empty).
    let about: String
    /// Every flag, by heading; the options every command takes come last.
    let groups: [OptionGroup]
    let handler: Handler

    init(
        _ name: String, synopsis: String? = nil, summary: String, usage: [String]? = nil, about: String = "",
        options: [Option] = [], sources: [Option] = [], handler: Handler
    ) {
        self.name = name
        self.synopsis = synopsis ?? name
        self.summary = summary
        self.usage = usage ?? ["\(name) [options]"]
        self.about = about
        var groups: [OptionGroup] = []
        if !options.isEmpty { groups.append(OptionGroup(title: "Options:", options: options)) }
        if !sources.isEmpty { groups.append(OptionGroup(title: "Source options:", options: sources)) }
        if case .parsed = handler {
            groups.append(OptionGroup(title: Command.commonTitle, options: Option.common))
        }
        self.groups = groups
        self.handler = handler
    }

    /// The heading of the options every command takes.
    static let commonTitle = "Options every command takes:"

    /// Every flag the command accepts.
    var options: [Option] { groups.flatMap(\.options) }

    func option(named name: String) -> Option? { options.first { $0.names.contains(name) } }

    /// The command's `--help`.
    var help: String {
        var lines = usage.enumerated().map { ($0.offset == 0 ? "Usage: " : "       ") + "plings-bridge " + $0.element }
        if !about.isEmpty {
            lines += [""] + about.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }
        for group in groups {
            lines += ["", group.title] + Command.describe(group.options)
        }
        return lines.joined(separator: "\n")
    }

    /// The left column's width: help text starts in column 28, as in `plings-bridge --help`.
    static let column = 25

    /// Two columns: the label (`  --flag VALUE`), then the text; a label too long for its column gets a line of
    /// its own.
    static func row(_ label: String, _ text: String) -> [String] {
        let indent = String(repeating: " ", count: column + 2)
        var text = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var lines: [String] = []
        let left = "  " + label
        if left.count < indent.count - 1, let first = text.first {
            lines.append(left + String(repeating: " ", count: indent.count - left.count) + first)
            text.removeFirst()
        } else {
            lines.append(left)
        }
        return lines + text.map { indent + $0 }
    }

    static func describe(_ options: [Option]) -> [String] {
        options.flatMap { option in
            row(option.names.joined(separator: ", ") + (option.value.map { " " + $0 } ?? ""), option.help)
        }
    }
}
