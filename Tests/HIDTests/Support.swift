import BridgeCore
import BridgeTestSupport
import Foundation
import Glibc
import Logging
import Platform
import Testing

@testable import HID

/// What a source submits, for a test to wait for (bounded).
typealias ReadCollector = Collector<Read>

extension Collector where Value == Read {
    /// The source's `submit` callback.
    var submit: @Sendable (Read) -> Void { { [self] read in append(read) } }

    /// Waits until at least `count` reads arrived or `timeout` passed; returns what arrived.
    @discardableResult
    func wait(for count: Int, timeout: Double = 5) -> [Read] {
        wait(count: count, timeout: timeout)
        return all
    }
}

/// A logger writing into a pipe whose text a test can wait for.
final class CapturedLog: Sendable {
    let logger: Logger
    private let readFD: Int32
    private let text = Mutex("")

    init() {
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        readFD = fds[0]
        let flags = fcntl(fds[0], F_GETFL)
        _ = fcntl(fds[0], F_SETFL, flags | O_NONBLOCK)
        logger = Logger(minimum: .debug, fd: fds[1])
    }

    /// Everything logged so far.
    var contents: String {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(readFD, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            let chunk = String(decoding: buffer[0..<n], as: UTF8.self)
            text.withLock { $0 += chunk }
        }
        return text.withLock { $0 }
    }

    /// Waits (bounded) until the log contains `needle`: blocks in poll() on the log's pipe, so it wakes on
    /// each line the source writes rather than re-checking on a timer.
    func wait(for needle: String, timeout: Double = 5) -> Bool {
        let deadline = MonotonicClock.deadline(after: timeout)
        while !contents.contains(needle) {
            let left = deadline - MonotonicClock.now()
            if left <= 0 { return false }
            var descriptor = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, Int32(left * 1000) + 1)
        }
        return true
    }

    func count(of needle: String) -> Int { contents.components(separatedBy: needle).count - 1 }
}

/// A pipe standing in for an evdev node: the reader gets `readFD`, the test writes raw records.
struct EventPipe {
    let readFD: Int32
    let writeFD: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        readFD = fds[0]
        writeFD = fds[1]
    }

    func write(_ events: [InputEvent]) {
        write(InputEvent.encode(events))
    }

    func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(writeFD, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    func closeWriter() { _ = Glibc.close(writeFD) }
}

enum Script {
    /// `EventScript.typing` or a test failure value (an empty list never decodes to anything).
    static func typing(
        _ text: String, _ layout: KeyboardLayout, suffix: KeystrokeDecoder.Suffix? = .enter,
        modifiers: EventScript.ModifierStyle = .sameReport, altGr: EventScript.AltGrStyle = .rightAlt,
        start: Int64 = 1_000_000
    ) -> [InputEvent] {
        EventScript.typing(
            text, layout: layout, suffix: suffix, modifierStyle: modifiers, altGrStyle: altGr,
            timing: EventScript.Timing(start: start)) ?? []
    }

    static let synDropped = InputEvent(type: Evdev.EV_SYN, code: Evdev.SYN_DROPPED, value: 0)
}

extension JSONValue {
    var arrayValue: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }
}

/// The layouts the tests use most, compiled from xkb-data (a failure to compile is a test failure: the
/// layout types nothing).
extension KeyboardLayout {
    static func xkb(_ name: String) -> KeyboardLayout {
        do {
            return try XKBLayouts.layout(name)
        } catch {
            Issue.record("cannot compile \(name): \(error)")
            return HIDSource.emptyLayout
        }
    }

    static let us = xkb("us")
    static let se = xkb("se")
    static let de = xkb("de")
    static let uk = xkb("uk")
    static let fr = xkb("fr")
}
