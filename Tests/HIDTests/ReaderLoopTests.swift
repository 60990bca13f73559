import BridgeCore
import BridgeTestSupport
import CEvdevShim
import Foundation
import Glibc
import Logging
import Platform
import Testing

@testable import HID

/// The reader loop over pipes carrying raw 24-byte records: no udev, no rig. ioctls fail with ENOTTY there.
@Suite(.serialized)
struct ReaderLoopTests {
    func source(_ configure: (inout BridgeConfig.HID) -> Void = { _ in }) -> (HIDSource, ReadCollector, CapturedLog) {
        var config = BridgeConfig().hid
        configure(&config)
        let collector = ReadCollector()
        let log = CapturedLog()
        let source = HIDSource(config: config, logger: log.logger, udev: false, submit: collector.submit)
        source.start()
        return (source, collector, log)
    }

    @Test func usLineWithEnterBecomesAHIDRead() {
        let (source, collector, log) = source()
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "scanner-A")
        let url = "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJ&p=4.2.3.3.6"
        pipe.write(Script.typing(url, .us))
        let reads = collector.wait(for: 1)
        #expect(reads.map(\.raw) == [url])
        #expect(reads.first?.sourceKind == .hid)
        #expect(reads.first?.device == "scanner-A")
        #expect(reads.first.map { abs($0.time.timeIntervalSinceNow) < 5 } == true)
        // A pipe is not an evdev node: the grab fails with ENOTTY, which is only a warning.
        #expect(log.wait(for: "cannot grab the scanner"))
        #expect(log.contents.contains("errno \(ENOTTY)"))
        #expect(source.summary == "1 scanner: scanner-A (fd:\(pipe.readFD))")
        #expect(source.state.isUp)
    }

    @Test func seLayoutWithSeparateShiftAndAltGrAndTabSuffix() {
        let (source, collector, _) = source {
            $0.suffix = .tab
            $0.layout = "se"
        }
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "se")
        let text = "Plings-ÅÄÖ åäö @€{}\\"
        // An Enter inside the stream must not end the line when the suffix is Tab.
        pipe.write(Script.typing("AB", .se, suffix: .enter, modifiers: .separateReport))
        pipe.write(Script.typing(text, .se, suffix: .tab, modifiers: .separateReport))
        let reads = collector.wait(for: 1)
        #expect(reads.map(\.raw) == ["AB" + text])
    }

    /// The symptom docs/operations.md names for a scanner country that differs from `hid.layout`.
    @Test func layoutMismatchShowsAsWrongCharacters() {
        let (source, collector, _) = source { $0.layout = "se" }
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "mismatch")
        pipe.write(Script.typing("https://", .us))
        #expect(collector.wait(for: 1).map(\.raw) == ["httpsÖ--"])
    }

    @Test func bytesSplitAcrossWritesStillDecode() {
        let (source, collector, _) = source()
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "split")
        let bytes = InputEvent.encode(Script.typing("split-7", .us))
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + 17)
            pipe.write(Array(bytes[offset..<end]))
            offset = end
        }
        #expect(collector.wait(for: 1).map(\.raw) == ["split-7"])
    }

    @Test func synDroppedMidLineDiscardsOnlyThatLine() {
        let (source, collector, log) = source()
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "drops")
        let broken = Script.typing("broken-line", .us)
        pipe.write(
            Array(broken.prefix(broken.count / 2)) + [Script.synDropped] + Array(broken.suffix(broken.count / 2)))
        pipe.write(Script.typing("good-line", .us))
        #expect(collector.wait(for: 1).map(\.raw) == ["good-line"])
        #expect(log.wait(for: "SYN_DROPPED"))
        // After the drop the reader re-reads the held keys; on a pipe that fails and is only a warning.
        #expect(log.contents.contains("cannot read the scanner's held keys"))
    }

    @Test func overlongLineIsDiscardedAndReadingGoesOn() {
        let (source, collector, log) = source { $0.maxLineLength = 8 }
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "long")
        pipe.write(Script.typing("0123456789abcdef", .us))
        pipe.write(Script.typing("short", .us))
        #expect(collector.wait(for: 1).map(\.raw) == ["short"])
        #expect(log.count(of: "line longer than hid.maxLineLength") == 1)
    }

    @Test func interKeyTimeoutFiresWithoutFurtherInput() {
        let (source, collector, log) = source { $0.interKeyTimeout = 0.1 }
        defer { source.stop() }
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "half")
        let started = Date()
        pipe.write(Script.typing("half-a-scan", .us, suffix: nil))
        // Nothing else is written: only the poll timeout taken from pendingDeadline() can expire it.
        #expect(log.wait(for: "no suffix within hid.interKeyTimeout", timeout: 3))
        #expect(Date().timeIntervalSince(started) < 2)
        pipe.write(Script.typing("next", .us))
        #expect(collector.wait(for: 1).map(\.raw) == ["next"])
    }

    @Test func twoScannersTypingAtOnceNeverInterleave() {
        let (source, collector, _) = source()
        defer { source.stop() }
        let a = EventPipe()
        let b = EventPipe()
        source.attach(fd: a.readFD, name: "A")
        source.attach(fd: b.readFD, name: "B")
        let lineA = "https://s.plings.io/?t=q&i=AAAAAAAAAA&p=1.1"
        let lineB = "https://s.plings.io/?t=q&i=BBBBBBBBBB&p=2.2"
        let eventsA = Script.typing(lineA, .us)
        let eventsB = Script.typing(lineB, .us)
        // Alternate one report at a time between the two nodes.
        var i = 0
        while i < max(eventsA.count, eventsB.count) {
            if i < eventsA.count { a.write(Array(eventsA[i..<min(i + 3, eventsA.count)])) }
            if i < eventsB.count { b.write(Array(eventsB[i..<min(i + 3, eventsB.count)])) }
            i += 3
        }
        let reads = collector.wait(for: 2)
        #expect(reads.count == 2)
        #expect(Set(reads.map { "\($0.device)=\($0.raw)" }) == ["A=\(lineA)", "B=\(lineB)"])
    }

    @Test func endOfFileForgetsOnlyThatScanner() {
        let (source, collector, log) = source()
        defer { source.stop() }
        let a = EventPipe()
        let b = EventPipe()
        source.attach(fd: a.readFD, name: "A")
        source.attach(fd: b.readFD, name: "B")
        a.write(Script.typing("from-a", .us))
        #expect(collector.wait(for: 1).map(\.raw) == ["from-a"])
        a.closeWriter()
        #expect(log.wait(for: "msg=\"scanner removed\" device=A"))
        b.write(Script.typing("from-b", .us))
        #expect(collector.wait(for: 2).map(\.raw) == ["from-a", "from-b"])
        #expect(source.summary.hasPrefix("1 scanner: B"))
    }

    /// udev may announce a node before its permissions (or the node itself) are in place: the open is
    /// retried briefly instead of giving up on the scanner.
    @Test func openIsRetriedUntilTheNodeAppears() throws {
        let (source, collector, log) = source()
        defer { source.stop() }
        let dir = TemporaryDirectory("hid-fifo")
        defer { dir.remove() }
        let path = dir.file("event7")
        source.open(devnode: path, name: "late")
        // The first attempt fails (no node); the node appears while retries are pending.
        #expect(log.wait(for: "cannot open the scanner yet: retrying"))
        #expect(mkfifo(path, 0o600) == 0)
        // Blocks until the reader's retry opened the FIFO: that open is what this test is about.
        let writer = Glibc.open(path, O_WRONLY)
        try #require(writer >= 0)
        defer { _ = Glibc.close(writer) }
        let bytes = InputEvent.encode(Script.typing("late-node", .us))
        #expect(bytes.withUnsafeBytes { Glibc.write(writer, $0.baseAddress, $0.count) } == bytes.count)
        #expect(collector.wait(for: 1).map(\.raw) == ["late-node"])
        #expect(log.contents.contains("msg=\"scanner attached\" device=late devnode=\(path)"))
    }

    @Test func stopReturnsWithinOneSecondAndClosesTheNodes() {
        let (source, _, log) = source()
        let pipe = EventPipe()
        source.attach(fd: pipe.readFD, name: "S")
        #expect(log.wait(for: "scanner attached"))
        let started = Date()
        source.stop()
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(log.contents.contains("why=stopping"))
        // The read end was closed: writing now fails with EPIPE (SIGPIPE is ignored for this check).
        signal(SIGPIPE, SIG_IGN)
        let bytes = InputEvent.encode(Script.typing("x", .us))
        let written = bytes.withUnsafeBytes { Glibc.write(pipe.writeFD, $0.baseAddress, $0.count) }
        #expect(written == -1 && errno == EPIPE)
        #expect(source.summary == "no scanners found: waiting for one to be plugged in")
        #expect(!source.state.isUp)
    }

    @Test func disabledSourceDoesNotStart() {
        var config = BridgeConfig().hid
        config.enabled = false
        let source = HIDSource(config: config, logger: CapturedLog().logger, submit: { _ in })
        source.start()
        #expect(source.summary.hasPrefix("disabled"))
        #expect(!source.state.isUp)
        source.stop()
    }

    @Test func shimAgreesWithTheKernelLayout() {
        let computed = (UInt(1) << 30) | (UInt(MemoryLayout<Int32>.size) << 16) | (UInt(UInt8(ascii: "E")) << 8) | 0x90
        #expect(plings_evdev_eviocgrab_request() == computed)
        #expect(computed == 0x4004_4590)
        #expect(plings_input_event_offset_type() == 16)
        #expect(plings_input_event_offset_code() == 18)
        #expect(plings_input_event_offset_value() == 20)
        #expect(MemoryLayout<input_event>.size == InputEvent.size)
    }

    @Test func ioctlsOnAPipeFailWithENOTTY() throws {
        let pipe = EventPipe()
        defer {
            _ = Glibc.close(pipe.readFD)
            pipe.closeWriter()
        }
        #expect(throws: SystemError("ioctl(EVIOCGRAB)", errno: ENOTTY)) { try EvdevNode.grab(pipe.readFD, true) }
        #expect(throws: SystemError("ioctl(EVIOCGKEY)", errno: ENOTTY)) { try EvdevNode.heldKeys(pipe.readFD) }
        #expect(throws: SystemError("ioctl(EVIOCGNAME)", errno: ENOTTY)) { try EvdevNode.name(pipe.readFD) }
        #expect(throws: SystemError("open(/nonexistent/event9)", errno: ENOENT)) {
            _ = try EvdevNode.open("/nonexistent/event9")
        }
    }
}
