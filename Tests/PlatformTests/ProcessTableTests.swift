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
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        child.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        try child.run()
        defer { child.terminate() }
        let holders = ProcessTable.holders(of: path)
        #expect(holders == [ProcessTable.Process(pid: child.processIdentifier, name: "sleep")])
        #expect(ProcessTable.running("sleep").contains { $0.pid == child.processIdentifier })
        // This process opened the file too (for the child's stdin), and is never counted.
        #expect(!holders.contains { $0.pid == getpid() })
    }
}
