import Bridge
import BridgeCore
import Foundation
import HID
import Logging
import Spool
import Platform
import ReadPipeline

extension CLI {
    /// `plings-bridge scanners [--json]`: the devices each read source could read (keyboards, HID POS nodes,
    /// serial ports), which it takes and why, and whether they can be opened (and grabbed). `--watch` reads the scanners (as `run` would) and prints each line;
    /// with `--pipeline` each line also goes through the real pipeline into the spool (debounce included).
    func scanners(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("scanners takes no arguments") }
        let settings = try settings(args)
        if args.has("--watch") {
            return try watchScanners(args, settings)
        }
        // Every registered source's devices, in the registry's order: keyboards, HID POS nodes, serial ports.
        let listings = SourceRegistry.modules.flatMap { $0.listDevices?(settings.config) ?? [] }
        if args.json {
            print(JSONValue.array(listings.map(\.json)).encoded())
            return 0
        }
        if listings.isEmpty {
            print("(no keyboards, scanners, hidraw devices or USB serial ports found)")
            return 0
        }
        for listing in listings { listing.lines.forEach(show) }
        return 0
    }

    /// `scanners --watch`: runs the HID source until `--count` lines were read or `--duration` seconds passed
    /// (default: until killed), printing one JSON object per line as it is read (or committed).
    private func watchScanners(_ args: Arguments, _ settings: Settings) throws -> Int32 {
        let count = try args.value("--count").map { (text: String) throws -> Int in
            guard let n = Int(text), n > 0 else { throw CommandFailure.usage("--count must be a positive number") }
            return n
        }
        let duration = try args.value("--duration").map { try DurationText.wait($0, flag: "--duration") }
        let config = settings.config
        let printed = Mutex(0)
        let done = Monitor(false)
        let emit: @Sendable (JSONValue) -> Void = { value in
            let reached = printed.withLock { n -> Bool in
                // One write(2) per line, under the lock: lines never interleave and are never buffered.
                FileHandle.standardOutput.write(Data((value.encoded() + "\n").utf8))
                n += 1
                return count.map { n >= $0 } ?? false
            }
            if reached { done.update { $0 = true } }
        }
        @Sendable func readJSON(_ read: Read) -> [(String, JSONValue)] {
            [
                ("device", .string(read.device)), ("raw", .string(read.raw)),
                ("time", .string(Timestamp.format(read.time))),
            ]
        }
        var pipeline: Pipeline?
        if args.has("--pipeline") {
            let spool = try openSpool(settings, create: true)
            pipeline = Pipeline(
                spool: spool, builder: ScanBuilder(parser: PlingsURLParser(hosts: config.hosts)),
                fixProvider: NoFixProvider(), debounce: [.hid: config.hid.debounce], logger: logger)
            pipeline?.start()
        }
        let submit: @Sendable (Read) -> Void
        if let pipeline {
            submit = { read in
                pipeline.submit(read) { outcome in
                    var fields = readJSON(read)
                    switch outcome {
                    case .accepted(let scan):
                        fields += [
                            ("outcome", .string("accepted")), ("id", .string(scan.id)),
                            ("state", .string(scan.state.rawValue)),
                        ]
                    case .debounced:
                        fields.append(("outcome", .string("debounced")))
                    case .refused(let why):
                        fields += [("outcome", .string("refused")), ("error", .string(why))]
                    }
                    emit(.object(fields))
                }
            }
        } else {
            submit = { read in emit(.object(readJSON(read))) }
        }
        var hid = config.hid
        hid.enabled = true
        let source = HIDSource(config: hid, logger: logger, submit: submit)
        source.start()
        logger.info("watching scanners", [("summary", source.summary)])
        if let duration {
            done.wait(until: MonotonicClock.deadline(after: duration)) { $0 }
        } else {
            done.wait { $0 }
        }
        source.stop()
        pipeline?.stop()
        return 0
    }
}
