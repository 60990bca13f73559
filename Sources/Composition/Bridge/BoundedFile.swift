import BridgeCore
import Glibc
import Platform

/// Reads the small files the configuration names (the config file, the token file) with a size cap that is
/// checked on the opened file before anything is read, so a wrong path (a log, a disk image, `/dev/zero`) costs
/// neither memory nor time.
public enum BoundedFile {
    /// Config and token files are a few hundred bytes; 1 MiB leaves room for any real one.
    public static let maximumSize = 1 << 20

    /// What opening the file found.
    public enum Contents: Sendable, Equatable {
        /// The bytes, and the file's permission bits (for the token file's group/other check).
        case read([UInt8], mode: UInt32)
        case missing
        /// The file exists but this user may not open it (EACCES or EPERM).
        case denied
    }

    /// Opens `path` and reads it whole if it is at most `maximumSize` bytes. `what` (e.g. "config file") starts
    /// every error. A regular file is refused by its size (fstat) before reading; other files (a pipe from
    /// `<(...)`) are refused as soon as more than the cap has arrived.
    public static func read(_ path: String, what: String) throws(ConfigError) -> Contents {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(path, O_RDONLY | O_NOCTTY)
        } catch {
            switch error.errno {
            case ENOENT: return .missing
            case EACCES, EPERM: return .denied
            default: throw ConfigError("cannot open \(what) \(path): \(String(cString: strerror(error.errno)))")
            }
        }
        var info = stat()
        guard fstat(file.rawValue, &info) == 0 else {
            throw ConfigError("cannot read \(what) \(path): \(String(cString: strerror(errno)))")
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFDIR { throw ConfigError("\(what) \(path) is a directory") }
        if type == S_IFREG, info.st_size > maximumSize { throw tooLarge(what, path, "is \(info.st_size) bytes") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count <= maximumSize {
            let n: Int
            do {
                n = try file.read(into: &chunk)
            } catch {
                throw ConfigError("cannot read \(what) \(path): \(String(cString: strerror(error.errno)))")
            }
            if n == 0 { return .read(bytes, mode: UInt32(info.st_mode & 0o7777)) }
            bytes += chunk[0..<n]
        }
        throw tooLarge(what, path, "holds more than \(maximumSize) bytes")
    }

    private static func tooLarge(_ what: String, _ path: String, _ size: String) -> ConfigError {
        ConfigError("\(what) \(path) \(size); config and token files are limited to 1 MiB (\(maximumSize) bytes)")
    }
}
