import BridgeCore
import BridgeTestSupport
import Foundation
import HID

/// `plings-bench evemu`: prints the evemu event lines a keyboard-wedge scanner produces when it types TEXT,
/// for `umockdev-run -e /dev/input/eventN=FILE` (used by `scripts/demo`). umockdev replays the file in real
/// time from when it is loaded, so `--start` is the delay before the first line arrives.
enum EvemuCommand {
    static func run(arguments: [String]) {
        var texts: [String] = []
        var layoutName = "us"
        var start = 1.0
        var gap = 2.0
        var suffix: KeystrokeDecoder.Suffix? = .enter
        var i = 0
        func value() -> String {
            guard i + 1 < arguments.count else { fail("\(arguments[i]) needs a value") }
            i += 1
            return arguments[i]
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--text": texts.append(value())
            case "--layout": layoutName = value()
            case "--start":
                guard let seconds = Double(value()), seconds >= 0 else { fail("--start wants seconds >= 0") }
                start = seconds
            case "--gap":
                guard let seconds = Double(value()), seconds >= 0 else { fail("--gap wants seconds >= 0") }
                gap = seconds
            case "--suffix":
                let name = value()
                if name == "none" {
                    suffix = nil
                } else if let known = KeystrokeDecoder.Suffix(rawValue: name) {
                    suffix = known
                } else {
                    fail("--suffix wants enter, tab or none")
                }
            case "-h", "--help":
                print(usage)
                exit(0)
            default: fail("unknown argument \(arguments[i])")
            }
            i += 1
        }
        guard !texts.isEmpty else { fail("--text TEXT is required") }
        let layout: KeyboardLayout
        do {
            layout = try XKBLayouts.layout(layoutName)
        } catch {
            fail(error.message)
        }
        // umockdev times a replay from the first event, not from zero: a lone SYN_REPORT at 0 s makes the
        // typing really start --start seconds after the file is loaded.
        let lead = InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_REPORT, value: 0)
        var output = start > 0 ? EventScript.evemuText([lead]) : ""
        var at = Int64((start * 1_000_000).rounded())
        for text in texts {
            guard
                let events = EventScript.typing(
                    text, layout: layout, suffix: suffix, timing: EventScript.Timing(start: at))
            else { fail("layout \(layout.name) cannot type \(text)") }
            output += EventScript.evemuText(events)
            let last = events.last.map { $0.seconds * 1_000_000 + $0.microseconds } ?? at
            at = last + Int64((gap * 1_000_000).rounded())
        }
        FileHandle.standardOutput.write(Data(output.utf8))
    }

    static let usage = """
        Usage: plings-bench evemu --text TEXT [--text TEXT ...] [--layout us] [--start 1] [--gap 2] [--suffix enter]
          Prints the evemu lines (E: sec.usec type code value) of a scanner typing each TEXT, the first
          starting --start seconds in, each next one --gap seconds after the previous one ends.
        """

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("plings-bench evemu: \(message)\n\(usage)\n".utf8))
        exit(2)
    }
}
