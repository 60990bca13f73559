import Foundation
import Glibc

/// What `/proc` says of the other processes on the machine, for `doctor`: who holds a device node open, and
/// whether a program runs. Without root only this user's processes can be seen: an answer is what could be seen.
public enum ProcessTable {
    /// One process: its id and its command name (`/proc/PID/comm`).
    public struct Process: Sendable, Equatable {
        public var pid: Int32
        public var name: String
    }

    /// The processes other than this one with `path` open (a link in `/proc/PID/fd` that resolves to it).
    public static func holders(of path: String) -> [Process] {
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return pids().filter { pid in
            guard pid != getpid(), let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
            else { return false }
            return fds.contains { fd in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == target
            }
        }.map { Process(pid: $0, name: name(of: $0) ?? "?") }
    }

    /// The processes whose command name is `name`.
    public static func running(_ name: String) -> [Process] {
        pids().compactMap { pid in
            self.name(of: pid) == name ? Process(pid: pid, name: name) : nil
        }
    }

    static func pids() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
    }

    static func name(of pid: Int32) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
