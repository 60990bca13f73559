import CSysShim
import Glibc

/// Random bytes from the kernel's CSPRNG (getrandom(2)): for secrets such as session ids.
public enum KernelRandom {
    /// `count` bytes, or nil when the kernel refuses (an error other than an interruption).
    public static func bytes(_ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                plings_getrandom(buffer.baseAddress.map { $0 + filled }, UInt(count - filled))
            }
            if got < 0 {
                if errno == EINTR { continue }
                return nil
            }
            filled += got
        }
        return bytes
    }
}
