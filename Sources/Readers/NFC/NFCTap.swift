import BridgeCore
import Foundation
import Platform

/// What happened on one tap, with its timings: the data `test-read` prints and the benchmark measures.
///
/// Emitted for every new card on a selected reader, whether its read succeeded (`result`) or failed (`error`).
/// For a successful read, `read` is what was (or, without a submit, would have been) handed to the pipeline.
public struct NFCTapEvent: Sendable {
    /// The PC/SC reader name.
    public var reader: String
    /// The name its reads carry (`nfc.names`, else the PC/SC name).
    public var device: String?
    /// Where the reader is plugged in (its USB port and serial), as far as known.
    public var identity: ReaderIdentity?
    /// The card's ATR as pcscd reported it.
    public var atr: [UInt8]
    /// The tag kind decided from the ATR.
    public var kind: TagKind
    /// Wall-clock time the card was detected (the `Read`'s time).
    public var detectedAt: Date
    /// `MonotonicClock` time the card was detected (when `SCardGetStatusChange` returned).
    public var detectedMonotonic: Double
    /// `MonotonicClock` time the read finished (before the submit).
    public var finishedMonotonic: Double
    /// Seconds in `SCardConnect`.
    public var connectSeconds: Double
    /// Seconds from connected to read complete (all APDUs and parsing).
    public var readSeconds: Double
    /// Seconds of `readSeconds` spent waiting inside `SCardTransmit`.
    public var transmitSeconds: Double
    /// APDUs sent (0 when the connect failed).
    public var apduCount: Int
    /// The completed read, if it completed.
    public var result: TagReadResult?
    /// The read submitted to the pipeline, if any.
    public var read: Read?
    /// Why the read failed (one line), when it did.
    public var error: String?
    /// The reader's profile (from `nfc.profiles` or its name).
    public var profile: ReaderProfile = .plain
    /// The reader's firmware version, when asked for (`test-read`) and the reader answers its version command.
    public var firmware: String?

    /// Seconds from detection to the end of the read.
    public var detectToReadSeconds: Double { finishedMonotonic - detectedMonotonic }
    /// True when the read completed (with or without a URL).
    public var succeeded: Bool { error == nil }
    /// The UID as lower-case hex, when known.
    public var uidHex: String? { result?.uid.map(NFCHex.uid) }
}
