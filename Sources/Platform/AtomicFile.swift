import Glibc

/// Replaces a small file so that readers see the old or the new content, never a mix, and a power cut leaves
/// one of the two: write a temporary file beside it, fsync it, set its mode, rename it over the old one, fsync
/// the directory (the rename is durable only then).
public enum AtomicFile {
    /// Writes `bytes` to `path` with `mode` (e.g. 0o644 for node_exporter's textfile collector).
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws(SystemError) {
        let directory = parentDirectory(of: path)
        let temporary = path + ".tmp"
        let fd = try systemCall("open(\(temporary))") {
            open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)
        }
        do {
            try writeAll(fd, bytes, name: temporary)
            // The umask may have narrowed `mode` at creation; the file's readers need exactly `mode`.
            try systemCall("fchmod(\(temporary))") { fchmod(fd, mode) }
            try systemCall("fsync(\(temporary))") { fsync(fd) }
            close(fd)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        do {
            try systemCall("rename(\(temporary), \(path))") { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
        try syncDirectory(directory)
    }

    /// Writes every byte, resuming after short writes.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], name: String) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let start = offset
            let written = try systemCall("write(\(name))") {
                bytes.withUnsafeBytes { buffer in
                    buffer.baseAddress.map { Glibc.write(fd, $0 + start, buffer.count - start) } ?? 0
                }
            }
            offset += written
        }
    }

    /// fsyncs a directory, making the creation, rename or removal of its entries durable.
    public static func syncDirectory(_ directory: String) throws(SystemError) {
        let fd = try systemCall("open(\(directory))") { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try systemCall("fsync(\(directory))") { fsync(fd) }
    }

    /// The directory part of `path` ("." for a bare name).
    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
