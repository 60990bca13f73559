import BridgeCore
import Foundation
import Logging
import Platform
import Spool

/// What a damaged spool means to the service and the commands that write (issue 43). The spool moves a damaged file
/// aside and goes on in a fresh one (`Spool+Damage.swift`); this says so in one line, copies every scan still
/// readable in the damaged file into the fresh spool (`Spool.salvage`), writes `<damaged file>.salvaged` with what
/// it recovered once done, and keeps what happened for `status`, the metrics and `doctor`. A salvage cut short (the
/// service stopped) is done again at the next start: it copies only what is not there yet.
public final class SpoolDamageWatch: Sendable {
    private let spool: Spool
    private let logger: Logger
    /// The service salvages on a thread of its own (reads never wait for it); a command salvages before it ends.
    private let background: Bool
    private let salvagers = Mutex<[OwnThread]>([])
    /// The files being salvaged now: the start-up's leftovers and a damage found meanwhile never race on one.
    private let salvaging = Mutex<Set<String>>([])
    /// Told after a damage was found or a salvage ended (`status` follows at once).
    private let changed: @Sendable () -> Void
    /// Ends a running integrity check at the stop (`stopChecking`).
    private let checkStop = SpoolWorkStop()

    public init(spool: Spool, logger: Logger, background: Bool, changed: @escaping @Sendable () -> Void = {}) {
        self.spool = spool
        self.logger = logger
        self.background = background
        self.changed = changed
        spool.onDamage { [weak self] damage in self?.found(damage) }
    }

    private func found(_ damage: SpoolDamage) {
        logger.error(
            "spool damaged: moved aside; new reads go to a fresh spool and what can still be read of it is copied over",
            [("spool", damage.path), ("movedTo", damage.movedTo), ("error", damage.error)])
        changed()
        salvage(damage.movedTo)
    }

    /// Salvages each damaged file beside the spool that has no `.salvaged` record yet (at start).
    public func salvageLeftovers() {
        for file in SpoolDamageWatch.damagedFiles(of: spool.path) where SpoolDamageWatch.salvaged(file) == nil {
            salvage(file)
        }
    }

    /// How often the whole file is checked while the service runs (and once at its start).
    public static let checkInterval: Double = 86_400

    /// Checks the whole spool file (SQLite's quick check, ~1 s per 100 MB) and returns when it is done: a damaged
    /// file is moved aside and salvaged, as when a statement finds it. The check reads on a connection of its own
    /// and takes no write lock, so commits go on meanwhile. It runs on a thread of its own at the lowest priority
    /// that takes no signal, which ends with it: a thread left at nice 19 could be the one a fatal signal lands on,
    /// and the runtime's crash report would then start (and be starved) at that priority.
    public func checkNow() {
        let spool = self.spool
        let logger = self.logger
        let checkStop = self.checkStop
        let check = OwnThread(name: "spool-check-run") {
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            // Linux keeps a nice value per thread: this one only (who 0 is the calling thread).
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
            do throws(SpoolError) {
                _ = try spool.check(stop: checkStop)
            } catch {
                logger.warn("spool: the integrity check could not run", [("error", error.description)])
            }
        }
        check.join()
    }

    private func salvage(_ file: String) {
        guard salvaging.withLock({ $0.insert(file).inserted }) else { return }
        let spool = self.spool
        let salvaging = self.salvaging
        let logger = self.logger
        let changed = self.changed
        let work: @Sendable () -> Void = {
            do throws(SpoolError) {
                let report = try spool.salvage(from: file)
                SpoolDamageWatch.recordSalvage(
                    of: file,
                    [
                        ("recovered", .integer(report.recovered)), ("alreadyHere", .integer(report.alreadyHere)),
                        ("unreadable", .integer(report.unreadable)), ("absent", .integer(report.absent)),
                        ("statesLost", .integer(report.statesLost)),
                    ])
                logger.info(
                    "spool salvaged: readable scans copied into the spool; the damaged file is kept until you remove it",
                    [
                        ("file", file), ("recovered", String(report.recovered)),
                        ("unreadable", String(report.unreadable)), ("absent", String(report.absent)),
                        ("statesLost", String(report.statesLost)),
                    ])
            } catch {
                if case .sqlite(let sqlite) = error, sqlite.isDamage {
                    // The file itself cannot be read at all (its schema is gone): no later try can do better, so
                    // the outcome is recorded as a salvage that got nothing back, for `status` and `doctor`.
                    SpoolDamageWatch.recordSalvage(
                        of: file, [("recovered", .integer(0)), ("error", .string(error.description))])
                    logger.error(
                        "spool salvage: the damaged file cannot be read at all; no scan could be copied from it",
                        [("file", file), ("error", error.description)])
                } else {
                    // A failure of the fresh spool (a full disk): tried again at the next start.
                    logger.error(
                        "spool: cannot salvage the damaged file now; it is kept and tried again at the next start",
                        [("file", file), ("error", error.description)])
                }
            }
            salvaging.withLock { _ = $0.remove(file) }
            changed()
        }
        if background {
            salvagers.withLock { $0.append(OwnThread(name: "spool-salvage", work)) }
        } else {
            work()
        }
    }

    /// Writes `<file>.salvaged`: what the salvage of `file` got (`fields`) and when; its presence marks it done.
    private static func recordSalvage(of file: String, _ fields: [(String, JSONValue)]) {
        let record = JSONValue.object(fields + [("at", .string(Timestamp.format(Date())))])
        try? (record.encoded() + "\n").write(toFile: file + ".salvaged", atomically: true, encoding: .utf8)
    }

    /// Ends a check in progress at once, without a verdict, and every later one: the service is stopping, and a
    /// check at the lowest priority on a busy box would hold its stop for seconds (the next start checks again).
    public func stopChecking() { checkStop.stop() }

    /// Leaves a salvage or check in progress to end with the process (a salvage is done again at the next start).
    public func stop() {
        for thread in salvagers.withLock({ $0 }) { thread.detach() }
    }

    /// The damaged files moved aside beside the spool at `path` (`<name>.damaged-<UTC time>`), oldest first.
    public static func damagedFiles(of path: String) -> [String] {
        let directory = (path as NSString).deletingLastPathComponent
        let prefix = (path as NSString).lastPathComponent + ".damaged-"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? []
        return names.filter { name in
            name.hasPrefix(prefix) && !name.hasSuffix("-wal") && !name.hasSuffix("-shm")
                && !name.hasSuffix(".salvaged") && !name.hasSuffix(".rebuilt-header")
        }.sorted().map { directory.isEmpty ? $0 : directory + "/" + $0 }
    }

    /// What the salvage of `file` recovered, when it has been done.
    public static func salvaged(_ file: String) -> JSONValue? {
        guard let data = FileManager.default.contents(atPath: file + ".salvaged") else { return nil }
        return try? JSONParser.parse(Array(data))
    }

    /// The spool's `damaged` member of `status`: each damaged file beside it and what its salvage recovered (null
    /// while it runs or when it failed).
    public static func statusEntry(of path: String) -> JSONValue {
        .array(
            damagedFiles(of: path).map { file in
                .object([("file", .string(file)), ("salvaged", salvaged(file) ?? .null)])
            })
    }
}
