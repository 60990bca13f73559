import CEvdevShim
import Glibc
import Platform

/// The evdev ioctls the reader needs, on an open fd (owned elsewhere, by a `FileDescriptor`). Each returns or
/// throws `SystemError`; callers decide what is fatal (on a pipe or a pty every one fails with `ENOTTY`, which
/// is a warning there).
enum EvdevNode {
    /// Opens `path` read-only, non-blocking, close-on-exec.
    static func open(_ path: String) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK)
    }

    /// Makes an fd handed in from elsewhere (tests: a pipe) non-blocking, as the reader requires.
    static func setNonBlocking(_ fd: Int32) throws(SystemError) {
        let flags = try systemCall("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        try systemCall("fcntl(F_SETFL)") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Takes (`on`) or releases the exclusive grab.
    static func grab(_ fd: Int32, _ on: Bool) throws(SystemError) {
        try systemCall(on ? "ioctl(EVIOCGRAB)" : "ioctl(EVIOCGRAB, 0)") { plings_evdev_grab(fd, on ? 1 : 0) }
    }

    /// The kernel's device name (`EVIOCGNAME`, 256-byte buffer).
    static func name(_ fd: Int32) throws(SystemError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PLINGS_EVDEV_NAME_BYTES))
        try buffer.withUnsafeMutableBufferPointer { (pointer) throws(SystemError) in
            guard let base = pointer.baseAddress else { return }
            try systemCall("ioctl(EVIOCGNAME)") { plings_evdev_name(fd, base) }
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Vendor and product id (`EVIOCGID`).
    static func id(_ fd: Int32) throws(SystemError) -> (vendor: UInt16, product: UInt16) {
        var bus: UInt16 = 0
        var vendor: UInt16 = 0
        var product: UInt16 = 0
        var version: UInt16 = 0
        try systemCall("ioctl(EVIOCGID)") { plings_evdev_id(fd, &bus, &vendor, &product, &version) }
        return (vendor, product)
    }

    /// The pressed-key bitmap (`EVIOCGKEY`, 96 bytes).
    static func heldKeys(_ fd: Int32) throws(SystemError) -> [UInt8] {
        var bitmap = [UInt8](repeating: 0, count: Int(PLINGS_EVDEV_KEY_BITMAP_BYTES))
        try bitmap.withUnsafeMutableBufferPointer { (pointer) throws(SystemError) in
            guard let base = pointer.baseAddress else { return }
            try systemCall("ioctl(EVIOCGKEY)") { plings_evdev_keys(fd, base) }
        }
        return bitmap
    }
}
