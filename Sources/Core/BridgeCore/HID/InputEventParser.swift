import Foundation

/// Splits a byte stream from an evdev node (or a pipe carrying the same records) into `InputEvent`s.
///
/// `read(2)` on a real evdev node returns whole records, but pipes, FIFOs and test rigs may split a
/// record across reads, so any chunking is accepted: an incomplete tail (at most 23 bytes) is kept
/// and completed by the next chunk. Every byte pattern is a valid record, so parsing cannot fail;
/// nonsense values are the decoder's business.
public struct InputEventParser: Sendable {
    /// Bytes of an incomplete record carried over from the previous chunk (always < `InputEvent.size`).
    private var carry: [UInt8] = []

    public init() {
        carry.reserveCapacity(InputEvent.size)
    }

    /// Number of bytes held back waiting for the rest of their record.
    public var bufferedByteCount: Int { carry.count }

    /// Forgets a held-back partial record (after reopening the device, say).
    public mutating func reset() {
        carry.removeAll(keepingCapacity: true)
    }

    /// Parses `chunk`, calling `body` for each complete event in order. This is the hot path: no
    /// allocation unless a record straddles two chunks.
    public mutating func parse(
        _ chunk: UnsafeRawBufferPointer, _ body: (InputEvent) throws -> Void
    ) rethrows {
        var offset = 0
        if !carry.isEmpty {
            let take = min(InputEvent.size - carry.count, chunk.count)
            carry.append(contentsOf: chunk[0..<take])
            offset = take
            guard carry.count == InputEvent.size else { return }
            let event = carry.withUnsafeBytes { InputEvent.decodeUnchecked($0, 0) }
            carry.removeAll(keepingCapacity: true)
            try body(event)
        }
        let count = chunk.count
        while count - offset >= InputEvent.size {
            let event = InputEvent.decodeUnchecked(chunk, offset)
            offset += InputEvent.size
            try body(event)
        }
        if offset < count {
            carry.append(contentsOf: chunk[offset..<count])
        }
    }

    /// Convenience form returning the complete events in `chunk` (`[UInt8]`, `Data`, slices...).
    public mutating func parse(_ chunk: some ContiguousBytes) -> [InputEvent] {
        var events: [InputEvent] = []
        chunk.withUnsafeBytes { raw in
            events.reserveCapacity((raw.count + carry.count) / InputEvent.size)
            parse(raw) { events.append($0) }
        }
        return events
    }
}
