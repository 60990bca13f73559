import BridgeTestSupport
import Foundation
import Testing

@testable import Platform

/// `ProcessTable` against this machine's real `/proc`: a child that holds a file open is found by the file, and by
/// its command name.
struct ProcessTableTests {
    @Test func aProcessHoldingAFileIsNamed() throws {
        let path = NSTemporaryDirectory() + "process-table-\(getpid())"
        FileManager.default.createFile(atPath: path, contents: Data())
        defer { try? FileManager.default.removeItem(atPath: path) }
        // This process holds the file open too, and is never counted.
        let own = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? own.close() }
        // The shell opens the file as its stdin and becomes `sleep` (ChildProcess, not Foundation's `Process`,
        // whose run() can crash the whole test process: see ChildProcess).
        let child = ChildProcess(
            "/bin/sh", ["-c", "exec /bin/sleep 30 < \"$0\"", path], environment: nil, stdin: Pipe(), stdout: Pipe(),
            stderr: Pipe())
        try child.run()
        defer { child.terminate() }
        let expected = [ProcessTable.Process(pid: child.processIdentifier, name: "sleep")]
        #expect(
            eventually(timeout: 5) { ProcessTable.holders(of: path) == expected }, "\(ProcessTable.holders(of: path))")
        #expect(ProcessTable.running("sleep").contains { $0.pid == child.processIdentifier })
        #expect(!ProcessTable.holders(of: path).contains { $0.pid == getpid() })
    }
}
