import Bridge
import BridgeCore
import Foundation
import HID
import HIDPOS
import Logging
import Spool
import Platform
import ReadPipeline
import Serial

extension CLI {
    /// `plings-bridge scanners [--json]`: the keyboards udev knows, which are scanners and why, and whether
    /// they can be opened and grabbed. `--watch` reads the scanners (as `run` would) and prints each line;
    /// with `--pipeline` each line also goes through the real pipeline into the spool (debounce included).
    func scanners(_ args: Arguments) throws -> Int32 {
        guard args.positional.isEmpty else { throw CommandFailure.usage("scanners takes no arguments") }
        let settings = try settings(args)
        if args.has("--watch") {
            return try watchScanners(args, settings)
        }
        let found = HIDSource.scan(config: settings.config.hid)
        let ports = SerialSource.scan(config: settings.config.serial)
        let hidraw = HIDPOSSource.scan(config: settings.config.hidpos)
        if args.json {
            print(JSONValue.array(found.map(\.json) + hidraw.map(\.json) + ports.map(\.json)).encoded())
            return 0
        }
        if found.isEmpty && ports.isEmpty && hidraw.isEmpty {
            print("(no keyboards, scanners, hidraw devices or USB serial ports found)")
            return 0
        }
        for info in found {
            let id = "\(info.vendor ?? "????"):\(info.model ?? "????")"
            show("\(info.devnode)  \(id)  \(info.name)")
            show("    \(info.matched ? "scanner" : "ignored"): \(info.reason)")
            if let stable = info.stableName { show("    name: \(stable)  layout: \(info.layout ?? "-")") }
            show("    serial: \(info.serial ?? "-")  path: \(info.path ?? "-")")
            show(
                "    openable: \(info.openable ? "yes" : "no")  grabbable: \(info.grabbable ? "yes" : "no")"
                    + (info.problem.map { "  (\($0))" } ?? ""))
        }
        for listing in hidraw {
            let device = listing.device
            show(
                "\(device.devnode)  \(device.vendor ?? "????"):\(device.product ?? "????")  \(device.model ?? "-")"
                    + "  (hidraw)")
            show("    \(listing.matched ? "HID POS scanner" : "ignored"): \(listing.reason)")
            if listing.matched { show("    name: \(device.stableName)") }
            show("    serial: \(device.serial ?? "-")  path: \(device.path ?? "-")")
            show("    openable: \(listing.openable ? "yes" : "no")")
        }
        for listing in ports {
            let port = listing.port
            show(
                "\(port.devnode)  \(port.vendor ?? "????"):\(port.product ?? "????")  \(port.model ?? "-")  (serial port)"
            )
            show("    \(listing.matched ? "scanner" : "ignored"): \(listing.reason)")
            if listing.matched { show("    name: \(port.stableName)") }
            show("    serial: \(port.serial ?? "-")  path: \(port.path ?? "-")")
            show("    openable: \(listing.openable ? "yes" : "no")")
        }
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
