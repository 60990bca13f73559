import Glibc

/// Replaces a small file so that readers see the old or the new content, never a mix, and a power cut leaves
/// one of the two: write a temporary file beside it, fsync it, set its mode, rename it over the old one, fsync
/// the directory (the rename is durable only then).
public enum AtomicFile {
    /// Writes `bytes` to `path` with `mode` (e.g. 0o644 for node_exporter's textfile collector).
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws(SystemError) {
        let directory = parentDirectory(of: path)
        let temporary = path + ".tmp"
        let file = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: mode)
        do {
            try file.writeAll(bytes, call: "write(\(temporary))")
            // The umask may have narrowed `mode` at creation; the file's readers need exactly `mode`.
            try systemCall("fchmod(\(temporary))") { fchmod(file.rawValue, mode) }
            try systemCall("fsync(\(temporary))") { fsync(file.rawValue) }
        } catch {
            unlink(temporary)
            throw error
        }
        // Closed before the rename; a close error after a good fsync loses nothing, as before.
        try? file.close()
        do {
            try systemCall("rename(\(temporary), \(path))") { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
        try syncDirectory(directory)
    }

    /// fsyncs a directory, making the creation, rename or removal of its entries durable.
    public static func syncDirectory(_ directory: String) throws(SystemError) {
        let file = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY)
        try systemCall("fsync(\(directory))") { fsync(file.rawValue) }
    }

    /// The directory part of `path` ("." for a bare name).
    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
