import Bridge
import BridgeCore
import Foundation

/// plings-bridge(1) and the bash completion, made from the command table (`CLI.commands`), so neither can
/// list a flag the parser does not take.
extension CLI {
    func manpage(_ args: Arguments) throws -> Int32 {
        print(CLI.manualPage)
        return 0
    }

    func completion(_ args: Arguments) throws -> Int32 {
        guard args.positional == ["bash"] else { throw CommandFailure.usage("completion takes one shell: bash") }
        print(CLI.bashCompletion)
        return 0
    }

    /// Text for roff: a leading `.` or `'` would start a request, and `\` an escape; `-` is a hyphen in roff,
    /// `\-` the minus sign that flags are written with (so they can be searched and copied).
    static func roff(_ text: String) -> String {
        var out = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }

    static var manualPage: String {
        var lines = [
            ".TH PLINGS-BRIDGE 1 \"\" \"plings-bridge \(BridgeVersion.current)\" \"User Commands\"",
            ".SH NAME",
            "plings-bridge \\- reads Plings NFC tags and QR codes from fixed hardware and reports them to the Plings API",
            ".SH SYNOPSIS",
            ".B plings-bridge",
            ".I command",
            "[\\fIoptions\\fR]",
            ".SH DESCRIPTION",
            roff(
                "plings-bridge reads NFC tags through PC/SC readers and codes from USB barcode scanners, couples each "
                    + "read with a time and a position, commits it to a durable local spool and delivers it to the "
                    + "Plings API (and an MQTT broker when configured)."),
            ".SH COMMANDS",
        ]
        for command in commands {
            lines += [".TP", ".B " + roff(command.synopsis), roff(command.summary)]
            for usage in command.usage where usage != "\(command.name) [options]" {
                lines += [".br", "Usage: \\fBplings\\-bridge " + roff(usage) + "\\fR"]
            }
            let about = command.about.split(separator: "\n").map { String($0) }
            // Prose is filled; a table (lines indented by spaces, as `spool`'s) keeps its lines.
            if about.contains(where: { $0.hasPrefix("  ") }) {
                lines += [".RS", ".nf"] + about.map { roff($0) } + [".fi", ".RE"]
            } else if !about.isEmpty {
                lines += [".RS", roff(about.joined(separator: " ")), ".RE"]
            }
            for group in command.groups where group.title != Command.commonTitle {
                lines += [".RS"]
                for option in group.options {
                    let label = option.names.map { "\\fB" + roff($0) + "\\fR" }.joined(separator: ", ")
                    lines += [".TP", label + (option.value.map { " \\fI" + roff($0) + "\\fR" } ?? "")]
                    lines += [roff(option.help.replacingOccurrences(of: "\n", with: " "))]
                }
                lines += [".RE"]
            }
        }
        lines += [".SH OPTIONS", "Every command takes:"]
        for option in Option.common {
            let label = option.names.map { "\\fB" + roff($0) + "\\fR" }.joined(separator: ", ")
            lines += [".TP", label + (option.value.map { " \\fI" + roff($0) + "\\fR" } ?? ""), roff(option.help)]
        }
        lines += [
            ".SH EXIT STATUS",
            "0 success, 1 runtime failure, 2 usage or configuration error.",
            ".SH FILES",
            ".TP", ".I /etc/plings\\-bridge/config.json", "the configuration (docs/configuration.md)",
            ".TP", ".I /etc/plings\\-bridge/token", "the API token (plings:plings 0600)",
            ".TP", ".I /var/lib/plings\\-bridge/spool.sqlite", "the spool of the installed service",
            ".TP", ".I /run/plings\\-bridge/status.json", "the running service's status",
            ".SH SEE ALSO",
            "/usr/share/doc/plings\\-bridge/operations.md, /usr/share/doc/plings\\-bridge/configuration.md",
        ]
        return lines.joined(separator: "\n")
    }

    static var bashCompletion: String {
        func words(_ list: [String]) -> String { list.joined(separator: " ") }
        var cases: [String] = []
        for command in commands {
            let flags = command.options.flatMap(\.names)
            var body = "            opts=\"\(words(flags))\""
            if command.name == "spool" {
                body += "\n            [ \"$cword\" -eq 2 ] && opts=\"list stats retry export purge\""
            } else if command.name == "config" {
                body += "\n            [ \"$cword\" -eq 2 ] && opts=\"check\""
            } else if command.name == "completion" {
                body = "            opts=\"bash\""
            } else if command.name == "help" {
                body = "            opts=\"\(words(commands.map(\.name)))\""
            }
            cases.append("        \(command.name))\n\(body)\n            ;;")
        }
        // Values with a known set of answers; paths complete as files.
        let valued = commands.flatMap(\.options).filter { $0.value != nil }.flatMap(\.names)
        return """
            # bash completion for plings-bridge, generated by `plings-bridge completion bash` from its command table.
            _plings_bridge() {
                local cur prev cword opts
                cur=${COMP_WORDS[COMP_CWORD]}
                prev=${COMP_WORDS[COMP_CWORD-1]}
                cword=$COMP_CWORD
                case "$prev" in
                    --state) COMPREPLY=($(compgen -W "pending delivered dead unrecognized" -- "$cur")); return ;;
                    --source) COMPREPLY=($(compgen -W "nfc hid manual" -- "$cur")); return ;;
                    --log-level) COMPREPLY=($(compgen -W "debug info warn error" -- "$cur")); return ;;
                    --config|--spool|--api-token-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                    \(valued.filter { !["--state", "--source", "--log-level", "--config", "--spool", "--api-token-file"].contains($0) }.joined(separator: "|"))) return ;;
                esac
                if [ "$cword" -eq 1 ]; then
                    COMPREPLY=($(compgen -W "\(words(commands.map(\.name))) --help --version" -- "$cur"))
                    return
                fi
                case "${COMP_WORDS[1]}" in
            \(cases.joined(separator: "\n"))
                    *) opts="" ;;
                esac
                COMPREPLY=($(compgen -W "$opts" -- "$cur"))
            }
            complete -F _plings_bridge plings-bridge
            """
    }
}
