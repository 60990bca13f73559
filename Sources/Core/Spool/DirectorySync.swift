import Foundation
import Platform

/// Makes the spool's names in directories durable. fsync(2) on a file makes its data durable, not the
/// directory entry that leads to it: a new file or directory survives a power cut only once its directory is
/// fsynced. `Spool` creates its directory (and any missing parents) and its database through these.
enum DirectorySync {
    /// fsyncs the directory at `path`.
    static func sync(_ path: String) throws(SpoolError) {
        do {
            try AtomicFile.syncDirectory(path)
        } catch {
            throw .cannotSyncDirectory(path, "\(error)")
        }
    }

    /// Creates `path` and every missing parent (mode 0700), fsyncing each created level's parent so the new
    /// names survive a power cut, then fsyncs the parent of `path` even when nothing was created: a creator
    /// killed between its mkdir and its fsync would otherwise leave the gap open for the next process. That
    /// last fsync is best effort (a parent may be read-only or not ours to open); the created levels' are not.
    static func createDurably(_ path: String) throws(SpoolError) {
        var missing: [String] = []
        var level = path
        while !level.isEmpty, level != "/", level != ".", !FileManager.default.fileExists(atPath: level) {
            missing.append(level)
            level = (level as NSString).deletingLastPathComponent
        }
        for created in missing.reversed() {
            if mkdir(created, 0o700) != 0, errno != EEXIST {
                throw .cannotCreateDirectory(created, String(cString: strerror(errno)))
            }
            try sync(AtomicFile.parentDirectory(of: created))
        }
        if missing.isEmpty { try? sync(AtomicFile.parentDirectory(of: path)) }
    }
}
