import Glibc

/// A pty pair for serial tests and benchmarks: the master (the scanner's side) and the slave's path (the port the
/// bridge opens). What posix_openpt, unlockpt and ptsname do, which Swift's Glibc module does not import.
public enum PseudoTerminal {
    /// TIOCGPTN `_IOR('T', 0x30, unsigned int)` and TIOCSPTLCK `_IOW('T', 0x31, int)`: the pty's number, and its
    /// unlock. Function-like macros, so Swift cannot import them.
    static let tiocgptn: UInt = 2 << 30 | 4 << 16 | UInt(UInt8(ascii: "T")) << 8 | 0x30
    static let tiocsptlck: UInt = 1 << 30 | 4 << 16 | UInt(UInt8(ascii: "T")) << 8 | 0x31

    /// A new pair; nil when the kernel gives none. The caller closes the master.
    public static func open() -> (master: Int32, path: String)? {
        let master = Glibc.open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { return nil }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(master, tiocsptlck, &unlock) == 0, ioctl(master, tiocgptn, &number) == 0 else {
            close(master)
            return nil
        }
        return (master, "/dev/pts/\(number)")
    }
}
