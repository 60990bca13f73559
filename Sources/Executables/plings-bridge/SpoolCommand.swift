import Bridge
import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// One `spool` subcommand: its name, whether it changes the spool (a writable open, which also migrates it) or only
/// looks (a read-only open), and what it does with the spool it is given (nil: there is none yet). `spool`'s
/// synopsis, its flags' owners and dispatch read this one table.
struct SpoolSubcommand: Sendable {
    let name: String
    let changesSpool: Bool
    let run: @Sendable (CLI, Arguments, Settings, Spool?) throws -> Int32

    static let all: [SpoolSubcommand] = [
        SpoolSubcommand(name: "list", changesSpool: false) { try $0.spoolList($1, $3) },
        SpoolSubcommand(name: "stats", changesSpool: false) { try $0.spoolStats($1, $2, $3) },
        SpoolSubcommand(name: "retry", changesSpool: true) { try $0.spoolRetry($1, $2, $3) },
        SpoolSubcommand(name: "export", changesSpool: false) { cli, _, _, spool in try cli.spoolExport(spool) },
        SpoolSubcommand(name: "purge", changesSpool: true) { try $0.spoolPurge($1, $3) },
        SpoolSubcommand(name: "salvage", changesSpool: true) { try $0.spoolSalvage($1, $2, $3) },
    ]

    /// `list|stats|retry|export|purge`, for the synopsis.
    static var names: String { all.map(\.name).joined(separator: "|") }
}

extension CLI {
    /// `plings-bridge spool <subcommand>`: refuses another subcommand's flags, opens the spool as the subcommand
    /// needs (inspection of a spool that does not exist yet is an empty result, not an error), and runs it.
    func spool(_ args: Arguments) throws -> Int32 {
        guard let name = args.positional.first else {
            print(args.command.help)
            return 2
        }
        guard let sub = SpoolSubcommand.all.first(where: { $0.name == name }) else {
            throw CommandFailure.usage("unknown spool subcommand '\(name)'; one of \(SpoolSubcommand.names)")
        }
        // A flag of another subcommand (`spool list --dead`) would be ignored without a word: refuse it.
        for option in args.command.options where !option.subcommands.isEmpty && !option.subcommands.contains(name) {
            if let given = option.names.first(where: args.has) {
                let owners = option.subcommands.map { "spool \($0)" }.joined(separator: ", ")
                throw CommandFailure.usage("\(given) applies to \(owners) only")
            }
        }
        let settings = try sub.changesSpool ? settings(args) : inspectionSettings(args)
        try requirePermission(settings.spoolPath, what: "the spool", write: sub.changesSpool)
        let existing: Spool?
        do {
            if sub.changesSpool {
                existing =
                    FileManager.default.fileExists(atPath: settings.spoolPath)
                    ? try openSpool(settings, create: false) : nil
            } else {
                existing = try Spool.openIfExists(path: settings.spoolPath)
            }
        } catch let error as SpoolError {
            throw CommandFailure.runtime("cannot open the spool at \(settings.spoolPath): \(error.description)")
        }
        do {
            return try sub.run(self, args, settings, existing)
        } catch let error as SpoolError {
            throw CommandFailure.runtime(error.description)
        }
    }

    /// `spool list`: records by state, age and count, oldest first unless asked; each sink's state beside them.
    func spoolList(_ args: Arguments, _ existing: Spool?) throws -> Int32 {
        var state: ScanState?
        if let s = args.value("--state") {
            guard let parsed = ScanState(rawValue: s) else {
                throw CommandFailure.usage(
                    "--state must be " + ScanState.allCases.map(\.rawValue).joined(separator: ", "))
            }
            state = parsed
        }
        let sink = try Self.sink(args, in: existing)
        func count(_ flag: String) throws -> Int {
            try args.value(flag).map { (text: String) throws -> Int in
                guard let n = Int(text), n > 0 else {
                    throw CommandFailure.usage("\(flag) must be a positive number, not '\(text)'")
                }
                return n
            } ?? 0
        }
        let (limit, last) = (try count("--limit"), try count("--last"))
        if limit > 0, last > 0 {
            throw CommandFailure.usage("--limit (oldest) and --last (newest) exclude each other")
        }
        let since = try args.value("--since").map { (text: String) throws -> Date in
            guard let age = DurationText.parse(text), age <= Date().timeIntervalSince(DurationText.yearOne)
            else {
                throw CommandFailure.usage("--since '\(text)' is not an age such as 7d, 12h, 30m or seconds")
            }
            return Date().addingTimeInterval(-age)
        }
        let records =
            try existing?.list(
                state: state, sink: sink, limit: limit, newest: last, since: since,
                newestFirst: args.has("--newest-first"))
            ?? []
        // Each sink's own state beside the scan's (`state`, theirs together): {"api": "delivered", "mqtt":
        // "pending"}; the member is left out when no sink has the scan (a kept scan), so the line stays the record
        // `scan` printed.
        let sinks = try existing?.sinkStates(ids: records.map(\.id)) ?? [:]
        if args.json {
            for record in records { print(Self.listed(record, sinks: sinks[record.id] ?? [:]).encoded()) }
        } else {
            printTable(records, sinks: sinks)
        }
        return 0
    }

    /// The sink `--sink` names, refused (exit 2) when the spool has no queue of that name.
    static func sink(_ args: Arguments, in spool: Spool?) throws -> String? {
        guard let sink = args.value("--sink"), let spool else { return args.value("--sink") }
        let names = try spool.sinkNames()
        guard names.contains(sink) else {
            let known = names.isEmpty ? "none" : names.joined(separator: ", ")
            throw CommandFailure.usage("this spool has no sink '\(sink)' (its sinks: \(known))")
        }
        return sink
    }

    /// A record as `spool list --json` and `scan` print it: with `sinks`, each sink's own state, when any sink has it.
    static func listed(_ record: ScanRecord, sinks states: [String: String]) -> JSONValue {
        let json = record.json()
        guard !states.isEmpty, case .object(var members) = json else { return json }
        members.append(("sinks", .object(states.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
        return .object(members)
    }

    /// `spool export`: every record as a JSON line, in capture order, without holding them all in memory.
    func spoolExport(_ existing: Spool?) throws -> Int32 {
        let started = MonotonicClock.now()
        let meter = ProgressLine(what: "exported")
        var n = 0
        try existing?.forEach {
            print($0.json().encoded())
            n += 1
            if n % 10_000 == 0 { meter.update(n) }
        }
        meter.finish()
        // Only when it took a while: a quick export of a small spool stays quiet apart from its lines.
        if MonotonicClock.now() - started >= 1 {
            logger.info(
                "export finished",
                [("exported", String(n)), ("seconds", ProgressLine.seconds(MonotonicClock.now() - started))])
        }
        return 0
    }

    /// `spool stats`: counts by state, the oldest pending scan, the last error, each sink's queue.
    func spoolStats(_ args: Arguments, _ settings: Settings, _ existing: Spool?) throws -> Int32 {
        let stats =
            try existing?.stats()
            ?? SpoolStats(counts: [:], oldestPendingAge: nil, lastError: nil, schemaVersion: 0)
        let sinkStats = try existing?.sinkStats() ?? []
        if args.json {
            var json = stats.json()
            if case .object(var members) = json {
                members.append(("sinks", .object(sinkStats.map { ($0.name, $0.json()) })))
                json = .object(members)
            }
            print(json.encoded())
        } else {
            for state in ScanState.allCases { print("\(state.rawValue): \(stats.counts[state] ?? 0)") }
            show(
                "oldest pending: "
                    + (stats.oldestPendingAge.map { DurationText.describe($0) + " ago" } ?? "none"))
            show("last error: " + (stats.lastError ?? "none"))
            // A sink the spool lists but that never queued a scan and is off (the API on a site without one) is noise.
            for sink in sinkStats where sink.enabled || sink.pending + sink.delivered + sink.refused > 0 {
                var line = "sink \(sink.name)\(sink.enabled ? "" : " (disabled)"): \(sink.pending) pending, "
                line += "\(sink.delivered) delivered, "
                if sink.refused > 0 { line += "\(sink.refused) refused, " }
                line += "oldest pending: "
                line += sink.oldestPendingAge.map { DurationText.describe($0) + " ago" } ?? "none"
                line += ", last error: " + (sink.lastError ?? "none")
                show(line)
            }
            show("spool: \(settings.spoolPath)")
        }
        return 0
    }

    /// `spool retry ID|--dead|--kept [--sink NAME]`: what a sink refused (or still owes, for one ID) is pending
    /// again for it, due now; every sink's, or one sink's. `--kept` queues the scans no sink queued.
    func spoolRetry(_ args: Arguments, _ settings: Settings, _ existing: Spool?) throws -> Int32 {
        guard let spool = existing else { throw CommandFailure.runtime("no spool at \(settings.spoolPath)") }
        let sink = try Self.sink(args, in: spool)
        if args.has("--kept") {
            let n = try spool.queueKept(for: sink)
            print("queued \(n) kept scan(s) for " + (sink ?? "every enabled sink"))
        } else if args.has("--dead") {
            let n = try spool.retryDead(sink: sink)
            print("revived \(n) dead scan(s)" + (sink.map { " for \($0)" } ?? ""))
        } else {
            guard args.positional.count == 2 else {
                throw CommandFailure.usage("spool retry needs an ID, --dead or --kept")
            }
            guard try spool.retry(id: args.positional[1], sink: sink) else {
                throw CommandFailure.runtime(
                    "no dead or pending scan with id \(args.positional[1])" + (sink.map { " for \($0)" } ?? ""))
            }
            show("scan \(args.positional[1]) is pending again" + (sink.map { " for \($0)" } ?? ""))
        }
        return 0
    }

    /// `spool purge --delivered --older-than AGE`: delivered scans older than AGE go, in batches.
    func spoolPurge(_ args: Arguments, _ existing: Spool?) throws -> Int32 {
        guard args.has("--delivered") else {
            throw CommandFailure.usage(
                "purge needs --delivered (pending, kept and unrecognized scans are never purged)")
        }
        guard let text = args.value("--older-than") else {
            throw CommandFailure.usage("purge needs --older-than AGE, e.g. 7d, 12h, 30m or seconds")
        }
        guard let age = DurationText.parse(text) else {
            throw CommandFailure.usage(
                "--older-than '\(text)' is not an age: a finite number >= 0 of seconds, or with d, h, m, s, w")
        }
        // The cutoff must be a time the spool can write (RFC 3339: years 0001-9999).
        let now = Date()
        let oldest = now.timeIntervalSince(DurationText.yearOne)
        guard age <= oldest else {
            throw CommandFailure.usage(
                "--older-than \(text) reaches back before the year 1; at most \(Int(oldest / 86_400))d")
        }
        let started = MonotonicClock.now()
        let meter = ProgressLine(what: "purged")
        let n = try existing?.purgeDelivered(before: now.addingTimeInterval(-age)) { meter.update($0) } ?? 0
        meter.finish()
        logger.info(
            "purge finished",
            [("purged", String(n)), ("seconds", ProgressLine.seconds(MonotonicClock.now() - started))])
        print("purged \(n) delivered scan(s)")
        return 0
    }

    /// `spool salvage FILE`: copies every scan still readable in a damaged spool file into the spool, with its
    /// position, id, times and delivery states (issue 43); the file is only read. Prints what it recovered.
    func spoolSalvage(_ args: Arguments, _ settings: Settings, _ existing: Spool?) throws -> Int32 {
        guard args.positional.count == 2 else {
            throw CommandFailure.usage("salvage takes the damaged file: spool salvage FILE")
        }
        let file = args.positional[1]
        guard FileManager.default.fileExists(atPath: file) else {
            throw CommandFailure.runtime("no file at \(TerminalText.escape(file))")
        }
        let spool = try existing ?? openSpool(settings, create: true)
        let report = try spool.salvage(from: file)
        if args.json {
            print(
                JSONValue.object([
                    ("file", .string(file)), ("recovered", .integer(report.recovered)),
                    ("alreadyHere", .integer(report.alreadyHere)), ("unreadable", .integer(report.unreadable)),
                    ("absent", .integer(report.absent)), ("statesLost", .integer(report.statesLost)),
                ]).encoded())
        } else {
            print(
                "recovered \(report.recovered) scan(s) (\(report.alreadyHere) already here); "
                    + "\(report.unreadable) position(s) unreadable, \(report.absent) gave nothing (purged or lost); "
                    + "\(report.statesLost) recovered without their delivery states (sent again, same key)")
        }
        return 0
    }

    func printTable(_ records: [ScanRecord], sinks: [String: [String: String]] = [:]) {
        if records.isEmpty {
            print("(no scans)")
            return
        }
        for r in records {
            let what = r.identifier ?? (r.raw.isEmpty ? "(empty)" : String(r.raw.prefix(60)))
            var line =
                "\(Timestamp.format(r.createdAt))  \(r.state.rawValue.padding(12))  \(r.sourceKind.rawValue):\(r.device)  \(what)"
            line += "  " + (r.position.map { p in "\(p.latitude),\(p.longitude)" } ?? "-")
            if let error = r.lastError { line += "  [\(error)]" }
            for (sink, state) in (sinks[r.id] ?? [:]).sorted(by: { $0.key < $1.key }) { line += "  \(sink)=\(state)" }
            show(line + "  id=\(r.id)")
        }
    }
}

/// A running count on a terminal (`purged 120000...`), rewritten in place on stderr; silent when stderr is not a
/// terminal (a log, a pipe), where the one closing log line says it all.
final class ProgressLine {
    private let what: String
    private let enabled = isatty(2) == 1
    private var shown = false
    private var lastShown = -Double.infinity

    init(what: String) { self.what = what }

    func update(_ count: Int) {
        let now = MonotonicClock.now()
        guard enabled, now - lastShown >= 0.2 else { return }
        lastShown = now
        shown = true
        FileHandle.standardError.write(Data("\r\(what) \(count)...".utf8))
    }

    func finish() {
        if shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f", value) }
}
