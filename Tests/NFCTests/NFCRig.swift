import Bridge
import BridgeCore
import BridgeTestSupport
import Foundation
import Logging
import NFC
import Platform
import ReadPipeline
import Spool
import Testing

/// Every test that uses the rig, serialized across suites: there is one pcscd per machine (fixed vpcd ports), so
/// two rigs must never run at once. Run under `flock /tmp/pcscd.lock` so other packages' rigs wait too.
@Suite(.serialized)
enum NFCRigTests {}

/// A replaceable callback, called from the source's thread.
final class TapHook: Sendable {
    private let hook = Mutex<(@Sendable (NFCTapEvent) -> Void)?>(nil)

    func set(_ body: (@Sendable (NFCTapEvent) -> Void)?) { hook.withLock { $0 = body } }

    func call(_ event: NFCTapEvent) { hook.withLock { $0 }?(event) }
}

/// A replaceable callback without arguments.
final class Hook: Sendable {
    private let hook = Mutex<(@Sendable () -> Void)?>(nil)

    func set(_ body: (@Sendable () -> Void)?) { hook.withLock { $0 = body } }

    func call() { hook.withLock { $0 }?() }
}

/// A rig plus an `NFCSource` running against it, with its reads, tap events and log lines collected.
final class NFCHarness: Sendable {
    let rig: NFCRig
    let source: NFCSource
    let reads = Collector<Read>()
    let taps = Collector<NFCTapEvent>()
    let logDirectory = TemporaryDirectory("plings-nfc-log")
    private let logFD: Int32

    /// Runs on the source's thread inside each tap report: a test can hold the source there.
    let onTap = TapHook()

    /// Monotonic times at which the pipeline reported each read committed (with `commit`).
    let commits = Collector<Double>()
    /// Runs on the pipeline's thread before a commit is reported to the source: a test can hold it there.
    let beforeCommitReport = Hook()
    private let pipeline: Pipeline?
    private let spool: Spool?

    /// `commit`: reads go through a real `Pipeline` into a spool in the log directory, and the source's feedback
    /// waits for the commit, as in the service.
    init(
        patterns: [String] = [], rigArguments: [String] = [], start: Bool = true,
        configure: (inout BridgeConfig.NFC) -> Void = { _ in }, commit: Bool = false
    ) throws {
        rig = try NFCRig(arguments: rigArguments)
        logFD = open(logDirectory.file("log"), O_WRONLY | O_CREAT | O_APPEND, 0o644)
        var config = BridgeConfig().nfc
        config.readers = patterns
        configure(&config)
        let reads = self.reads
        let taps = self.taps
        let logger = Logger(minimum: .debug, fd: logFD)
        var committer: (@Sendable (Read, @escaping @Sendable (CommitResult) -> Void) -> Void)?
        if commit {
            let spool = try Spool(path: logDirectory.file("spool.sqlite"))
            let pipeline = Pipeline(
                spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: ["s.plings.io"])),
                fixProvider: NoFixProvider(), debounce: [:], logger: logger)
            pipeline.start()
            self.spool = spool
            self.pipeline = pipeline
            let commits = self.commits
            let hook = beforeCommitReport
            committer = { read, done in
                reads.append(read)
                pipeline.submit(read) { outcome in
                    commits.append(MonotonicClock.now())
                    hook.call()
                    switch outcome {
                    case .accepted(let scan): done(.committed(pending: scan.state == .pending))
                    case .debounced: done(.duplicate)
                    case .refused: done(.refused)
                    }
                }
            }
        } else {
            spool = nil
            pipeline = nil
        }
        source = NFCSource(
            config: config, hosts: ["s.plings.io"], logger: logger,
            submit: { reads.append($0) },
            onTap: { [onTap] event in
                taps.append(event)
                onTap.call(event)
            }, commit: committer)
        if start { source.start() }
    }

    /// Scans in the spool (with `commit`).
    var spooledCount: Int { (try? spool?.stats().counts.values.reduce(0, +)) ?? 0 }

    /// The source's log so far.
    var log: String { (try? String(contentsOfFile: logDirectory.file("log"), encoding: .utf8)) ?? "" }

    /// Log lines containing `text`.
    func logLines(containing text: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains(text) }
    }

    /// Taps a card, waits for the source's tap event for it, records the APDUs the card saw, removes the card.
    func tap(
        _ kind: String, uid: String = "04A1B2C3D4E5F6", _ data: String = "-", _ options: String = "",
        reader: Int = 0
    ) throws -> (event: NFCTapEvent, apdus: [String]) {
        let before = taps.all.count
        try rig.send("tap \(reader) \(kind) \(uid) \(data) \(options)")
        guard taps.wait(count: before + 1) else {
            throw RigFailure(description: "no tap event for \(kind) \(options); log:\n\(log)")
        }
        let apdus = try rig.apdus(reader)
        try rig.send("remove \(reader)")
        return (taps.all[before], apdus)
    }

    func close() {
        source.stop()
        pipeline?.stop()
        rig.close()
        close(logFD)
        logDirectory.remove()
    }

    private func close(_ fd: Int32) { _ = Glibc.close(fd) }
}

/// NDEF and Type 2 data-area builders for the tests (the rig takes hex).
enum NDEF {
    static let plingsURL = "https://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"

    /// One short record; `first`/`last` set MB/ME.
    static func record(tnf: UInt8 = 1, type: String, payload: [UInt8], first: Bool = true, last: Bool = true) -> [UInt8]
    {
        precondition(payload.count < 256)
        let header = (first ? 0x80 : 0) | (last ? 0x40 : 0) | 0x10 | tnf
        return [header, UInt8(type.utf8.count), UInt8(payload.count)] + Array(type.utf8) + payload
    }

    /// A long (4-byte payload length) URI record, for messages over 255 bytes.
    static func longURIRecord(_ uri: String) -> [UInt8] {
        let payload = NDEFURI.encodePayload(uri)
        let n = payload.count
        return [0xC1, 0x01, UInt8(n >> 24 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), 0x55]
            + payload
    }

    static func uri(_ uri: String, first: Bool = true, last: Bool = true) -> [UInt8] {
        record(type: "U", payload: NDEFURI.encodePayload(uri), first: first, last: last)
    }

    static func text(_ text: String, first: Bool = true, last: Bool = true) -> [UInt8] {
        record(type: "T", payload: [0x02] + Array("en".utf8) + Array(text.utf8), first: first, last: last)
    }

    static func smartPoster(_ inner: [UInt8]) -> [UInt8] {
        record(type: "Sp", payload: inner)
    }

    /// NDEF TLV (1- or 3-byte length) and the terminator.
    static func tlv(_ message: [UInt8], threeByteLength: Bool = false) -> [UInt8] {
        let header: [UInt8] =
            threeByteLength || message.count >= 0xFF
            ? [0x03, 0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)]
            : [0x03, UInt8(message.count)]
        return header + message + [0xFE]
    }

    static func hex(_ bytes: [UInt8]) -> String { NFCHex.uid(bytes) }

    /// The fewest APDUs a Type 2 read can take: UID, the CC read (CC and `perRead - 4` data bytes), then
    /// one read per `perRead` bytes until `end` data bytes are in.
    static func type2Minimum(end: Int, perRead: Int = 16) -> Int {
        let first = perRead - 4
        return 2 + max(0, end - first + perRead - 1) / perRead
    }

    /// The Type 4 sequence: UID, SELECT app, SELECT CC, READ CC, SELECT NDEF, READ NLEN, message chunks.
    static func type4Minimum(messageLength: Int, mle: Int = 255) -> Int {
        6 + (messageLength + min(mle, 255) - 1) / min(mle, 255)
    }
}
