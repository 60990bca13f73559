import BridgeCore
import CPCSCLite
import Foundation
import Udev

/// One reader as `plings-bridge readers` shows it.
public struct NFCReaderInfo: Sendable, Equatable {
    /// The PC/SC reader name.
    public var name: String
    /// A card is on the reader.
    public var cardPresent: Bool
    /// The card's ATR, when a card is present.
    public var atr: [UInt8]?
    /// The tag kind decided from the ATR, when a card is present.
    public var tagKind: TagKind?
    /// The card's UID (`FF CA 00 00 00`), when a card is present and answered.
    public var uid: [UInt8]?
    /// Why the UID is missing although a card is present (e.g. the card left, or answered 6A81).
    public var note: String?
    /// Where it is plugged in (its USB port and serial), or why that is unknown.
    public var identity = ReaderIdentity()
}

/// The answer of a one-shot reader listing.
public struct NFCReaderListing: Sendable {
    /// nil when pcscd answered; otherwise why there is no list (e.g. `pcscd not running`).
    public var problem: String?
    /// Every reader pcscd knows, whether or not it matches `nfc.readers`.
    public var readers: [NFCReaderInfo]
    /// The PC/SC error behind `problem`: its code, not its text, tells a refused user from an absent pcscd.
    public var error: PCSCError? = nil
}

/// One-shot PC/SC queries for the CLI (`readers`), separate from the long-running `NFCSource`.
public enum NFCReaders {
    /// The pcsc-lite version this build was compiled against, for `plings-bridge version`.
    public static var pcscLiteVersion: String { PCSCLITE_VERSION_NUMBER }

    /// Lists the readers with their card state, ATR, tag kind and UID. Never throws: no pcscd or no readers is
    /// an empty list with `problem` saying why. Connecting to read the UID is shared-mode and leaves the card.
    public static func list() -> NFCReaderListing {
        let context: PCSCContext
        do {
            context = try PCSCContext.establish()
        } catch {
            return NFCReaderListing(problem: "pcscd not running (\(error.name))", readers: [], error: error)
        }
        defer { context.release() }
        let names: [String]
        do {
            names = try context.listReaders()
        } catch {
            return NFCReaderListing(problem: "cannot list readers: \(error.description)", readers: [], error: error)
        }
        guard !names.isEmpty else { return NFCReaderListing(problem: nil, readers: []) }
        var states = names.map { ReaderStatus(name: $0, current: 0) }
        do {
            try context.getStatusChange(&states, timeout: 0)
        } catch {
            return NFCReaderListing(
                problem: "cannot read reader states: \(error.description)",
                readers: names.map { NFCReaderInfo(name: $0, cardPresent: false) }, error: error)
        }
        let udev = try? UdevContext()
        let readers = states.map { status -> NFCReaderInfo in
            let identity = ReaderIdentity.of(reader: status.name, context: context, udev: udev)
            guard status.cardPresent else {
                return NFCReaderInfo(
                    name: status.name, cardPresent: status.flags & ReaderFlags.present != 0, identity: identity)
            }
            var info = NFCReaderInfo(
                name: status.name, cardPresent: true, atr: status.atr, tagKind: TagKind.from(atr: status.atr),
                identity: identity)
            do throws(PCSCError) {
                let card = try context.connect(reader: status.name)
                defer { card.disconnect() }
                let raw = try card.transmit([0xFF, 0xCA, 0x00, 0x00, 0x00])
                if let response = APDUResponse(raw: raw), response.isSuccess, !response.data.isEmpty {
                    info.uid = TagKind.from(atr: status.atr).uidAsWritten(response.data)
                } else {
                    info.note = "no UID: the reader answered " + NFCHex.bytes(raw, separator: "")
                }
            } catch {
                info.note = "no UID: \(error.description)"
            }
            return info
        }
        return NFCReaderListing(problem: nil, readers: readers)
    }
}
