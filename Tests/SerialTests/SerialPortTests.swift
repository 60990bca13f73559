import BridgeTestSupport
import Glibc
import Platform
import Testing

@testable import Serial

/// `SerialPort.open` on a real pseudo-terminal of this kernel: the settings termios reports back afterwards.
struct SerialPortTests {
    /// TIOCGEXCL is `_IOR('T', 0x40, int)` (include/uapi/asm-generic/ioctls.h): read 2 << 30 | size 4 << 16 |
    /// 'T' << 8 | 0x40. A function-like macro, so Swift cannot import it.
    static let tiocgexcl: UInt = 2 << 30 | 4 << 16 | UInt(UInt8(ascii: "T")) << 8 | 0x40

    /// A pty pair: the master (the scanner's side) and the slave's path (the port the bridge opens).
    func pty() throws -> (master: Int32, path: String) { try #require(PseudoTerminal.open()) }

    @Test func opensExclusiveRawAtTheConfiguredSpeed() throws {
        let (master, path) = try pty()
        defer { close(master) }
        var notExclusive: String?
        let port = try SerialPort.open(path, baud: 19_200, notExclusive: &notExclusive)
        #expect(notExclusive == nil)
        var exclusive: Int32 = 0
        #expect(ioctl(port.rawValue, Self.tiocgexcl, &exclusive) == 0)
        #expect(exclusive == 1)
        var settings = termios()
        #expect(tcgetattr(port.rawValue, &settings) == 0)
        // termios(3), cfmakeraw: no line editing, echo or signals; no CR/NL translation or flow control on input;
        // no output processing; 8 data bits.
        #expect(settings.c_lflag & tcflag_t(ICANON | ECHO | ISIG | IEXTEN) == 0)
        #expect(settings.c_iflag & tcflag_t(ICRNL | INLCR | IGNCR | IXON | ISTRIP) == 0)
        #expect(settings.c_oflag & tcflag_t(OPOST) == 0)
        #expect(settings.c_cflag & tcflag_t(CSIZE) == tcflag_t(CS8))
        #expect(settings.c_cflag & tcflag_t(CLOCAL | CREAD) == tcflag_t(CLOCAL | CREAD))
        #expect(cfgetispeed(&settings) == speed_t(B19200) && cfgetospeed(&settings) == speed_t(B19200))
        #expect(fcntl(port.rawValue, F_GETFL) & O_NONBLOCK != 0)
    }

    @Test func bytesArriveUnchanged() throws {
        let (master, path) = try pty()
        defer { close(master) }
        var notExclusive: String?
        let port = try SerialPort.open(path, baud: 9600, notExclusive: &notExclusive)
        // CR, NUL, GS, DEL and a UTF-8 letter: a cooked tty would turn CR into LF and eat DEL.
        let sent: [UInt8] = [0x41, 0x0D, 0x00, 0x1D, 0x7F, 0xC3, 0xA5, 0x0A]
        #expect(write(master, sent, sent.count) == sent.count)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        let deadline = MonotonicClock.deadline(after: 5)
        while received.count < sent.count, MonotonicClock.now() < deadline {
            var fds = [pollfd(fd: port.rawValue, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, 100)
            if let count = try? port.read(into: &buffer), count > 0 { received += buffer[0..<count] }
        }
        #expect(received == sent)
    }

    @Test func aMissingPortIsAPlainError() {
        var notExclusive: String?
        #expect(throws: SystemError.self) {
            _ = try SerialPort.open("/dev/ttyPLINGSNONE", baud: 9600, notExclusive: &notExclusive)
        }
    }
}
