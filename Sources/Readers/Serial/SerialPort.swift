import Glibc
import Platform

/// Opening a serial port for a scanner: read-only (the bridge never writes to a scanner, so the unit allows the
/// ttys read access only), non-blocking, no controlling terminal, exclusive (`TIOCEXCL`: another open fails with
/// EBUSY, except for a process with CAP_SYS_ADMIN), raw mode at the configured speed.
enum SerialPort {
    /// Opens and configures `path`. `notExclusive` says why `TIOCEXCL` failed, if it did (not fatal: an emulated
    /// node may not support it).
    static func open(_ path: String, baud: Int, notExclusive: inout String?) throws(SystemError) -> FileDescriptor {
        let fd = try FileDescriptor.open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        notExclusive = nil
        do {
            try systemCall("ioctl(TIOCEXCL)") { ioctl(fd.rawValue, UInt(TIOCEXCL)) }
        } catch {
            notExclusive = error.description
        }
        try configure(fd.rawValue, baud: baud)
        // Whatever waited in the driver's buffer before we opened the port is not a scan of ours.
        _ = tcflush(fd.rawValue, TCIFLUSH)
        return fd
    }

    /// Raw mode (no echo, no line editing, no CR/NL translation, 8 data bits, receiver on, modem lines ignored),
    /// reads return what has arrived (VMIN 1, VTIME 0; the descriptor is non-blocking anyway).
    static func configure(_ fd: Int32, baud: Int) throws(SystemError) {
        var attributes = termios()
        try systemCall("tcgetattr") { tcgetattr(fd, &attributes) }
        cfmakeraw(&attributes)
        attributes.c_cflag |= tcflag_t(CLOCAL | CREAD)
        withUnsafeMutableBytes(of: &attributes.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        let speed = speed(for: baud)
        try systemCall("cfsetispeed") { cfsetispeed(&attributes, speed) }
        try systemCall("cfsetospeed") { cfsetospeed(&attributes, speed) }
        try systemCall("tcsetattr") { tcsetattr(fd, TCSANOW, &attributes) }
    }

    /// The termios speed constant for a rate of `SerialConfig.baudRates` (validated at load).
    static func speed(for baud: Int) -> speed_t {
        switch baud {
        case 1200: return speed_t(B1200)
        case 2400: return speed_t(B2400)
        case 4800: return speed_t(B4800)
        case 19_200: return speed_t(B19200)
        case 38_400: return speed_t(B38400)
        case 57_600: return speed_t(B57600)
        case 115_200: return speed_t(B115200)
        case 230_400: return speed_t(B230400)
        default: return speed_t(B9600)
        }
    }
}
