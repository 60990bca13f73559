/// The set of currently pressed key codes, as a 768-bit bitmap like the kernel's.
///
/// Kept so the I/O layer grabs the device only when no key is held (grabbing mid-press leaves the
/// release with the previous reader and a stuck key there). Codes at or above `KEY_CNT` are ignored.
struct HeldKeys: Sendable, Equatable {
    /// Bytes in an `EVIOCGKEY` bitmap (`KEY_CNT / 8`).
    static let bitmapByteCount = Int(Evdev.KEY_CNT) / 8

    private var words = [UInt64](repeating: 0, count: Int(Evdev.KEY_CNT) / 64)
    /// Number of codes in the set.
    private(set) var count = 0

    init() {}

    /// Reads an `EVIOCGKEY` bitmap: bit `code % 8` of byte `code / 8` (the kernel's `unsigned long`
    /// array read as bytes on a little-endian machine). Bytes beyond 96 are ignored; a short bitmap
    /// leaves the remaining keys released.
    init(bitmap: some Sequence<UInt8>) {
        for (index, byte) in bitmap.enumerated() where byte != 0 {
            guard index < Self.bitmapByteCount else { break }
            for bit in 0..<8 where byte & (1 << bit) != 0 {
                insert(UInt16(index * 8 + bit))
            }
        }
    }

    @inline(__always)
    func contains(_ code: UInt16) -> Bool {
        guard code < Evdev.KEY_CNT else { return false }
        return words[Int(code &>> 6)] & (1 &<< UInt64(code & 63)) != 0
    }

    @inline(__always)
    mutating func insert(_ code: UInt16) {
        guard code < Evdev.KEY_CNT else { return }
        let index = Int(code &>> 6)
        let bit: UInt64 = 1 &<< UInt64(code & 63)
        if words[index] & bit == 0 {
            words[index] |= bit
            count &+= 1
        }
    }

    @inline(__always)
    mutating func remove(_ code: UInt16) {
        guard code < Evdev.KEY_CNT else { return }
        let index = Int(code &>> 6)
        let bit: UInt64 = 1 &<< UInt64(code & 63)
        if words[index] & bit != 0 {
            words[index] &= ~bit
            count &-= 1
        }
    }

    mutating func removeAll() {
        for index in words.indices {
            words[index] = 0
        }
        count = 0
    }

    /// The held codes in ascending order.
    var codes: [UInt16] {
        (0..<Evdev.KEY_CNT).filter { contains($0) }
    }
}
