import Foundation

/// CPU time as the kernel counts it, for tests that tell a wait from a spin.
public enum CPUTime {
    /// User plus system time (in clock ticks of 10 ms) from a `stat` file of proc(5): a process's
    /// (`/proc/PID/stat`) or one thread's (`/proc/PID/task/TID/stat`); 0 when it cannot be read (gone).
    public static func ticks(statPath: String) -> Int {
        guard let stat = try? String(contentsOfFile: statPath, encoding: .utf8), let close = stat.lastIndex(of: ")")
        else { return 0 }
        // The command may hold spaces, so fields are counted after its closing parenthesis: state is [0], then
        // utime (the 14th field of the line) is [11] and stime (the 15th) is [12].
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    /// The ticks of this process's threads whose name (`comm`) is `name`.
    public static func ticks(ofThreadsNamed name: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.reduce(0) { sum, task in
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            guard comm.trimmingCharacters(in: .whitespacesAndNewlines) == name else { return sum }
            return sum + ticks(statPath: "/proc/self/task/\(task)/stat")
        }
    }
}
