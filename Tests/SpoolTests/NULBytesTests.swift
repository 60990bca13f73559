import BridgeCore
import BridgeTestSupport
import Foundation
import Spool
import Testing

/// Security review finding 6: text is bound with its byte count, so a NUL inside a read is stored, not a silent
/// end of the text. The stored bytes are read back by the sqlite3 shell, not by our own code.
@Suite(.serialized)
struct SpoolNULBytesTests {
    @Test func aNULInsideAReadIsStoredWhole() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("nul.sqlite")
        let raw = "https://s.plings.io/?t=n&i=4kyQ\u{0}Cd5t&p=1\u{0}tail"
        let read = Read(
            sourceKind: SourceKind("nfc"), device: "r\u{0}x", raw: raw, time: Date(timeIntervalSince1970: 1_781_424_000)
        )
        let scan = ScanBuilder(parser: PlingsURLParser()).build(read, fix: nil)
        #expect(scan.state == .unrecognized)
        do {
            let spool = try Spool(path: path)
            try spool.insert([scan])
            let back = try #require(try spool.list().first)
            #expect(Array(back.raw.utf8) == Array(raw.utf8))
            #expect(Array(back.device.utf8) == Array("r\u{0}x".utf8))
        }
        let shell = try ProcessRunner.run(
            "/usr/bin/sqlite3",
            [path, "SELECT hex(CAST(raw AS BLOB)), hex(CAST(device AS BLOB)), last_error FROM scans"], timeout: 10)
        #expect(shell.status == 0, "\(shell.stderr)")
        let hex = { (text: String) in text.utf8.map { String(format: "%02X", $0) }.joined() }
        #expect(shell.stdout == "\(hex(raw))|\(hex("r\u{0}x"))|URL contains a NUL at byte 32\n")
    }
}
