/// Reads the NDEF file of an NFC Forum Type 4 tag (ISO-DEP) with ISO 7816-4 short APDUs.
///
/// 1. SELECT the NDEF application `D2760000850101` (with Le 00, as mapping 2.0 requires). Anything but
///    9000/61xx is `noNDEFApplication`: phones (no HCE service for it) and bank cards answer 6A82.
/// 2. SELECT the CC file `E103` (P2=0C, no FCI), READ BINARY 15 bytes, parse it.
/// 3. SELECT the NDEF file from the CC, READ BINARY 2 bytes (NLEN). NLEN 0 is an empty tag (a result).
///    NLEN beyond the file size (minus the 2 NLEN bytes) is an error.
/// 4. READ BINARY the message from offset 2 in chunks of at most min(MLe, `maxReadLength`, 255) bytes.
///    Le 00 (256) is never sent. Offsets stay below 0x8000, the most a short READ BINARY can address.
///
/// Every READ BINARY (CC and NLEN included) advances by the bytes actually returned and asks again
/// for the rest, so a reader or tag that returns less than asked still works; a read returning no
/// data is an error, so the loop always progresses.
struct Type4TagReader<Transport: CardTransport> {
    var session: CardSession<Transport>
    /// Upper bound on Le for one READ BINARY, from `TagReadOptions` (clamped to 1...255).
    let maxReadLength: Int

    static var ndefApplicationSelect: [UInt8] {
        [0x00, 0xA4, 0x04, 0x00, 0x07, 0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01, 0x00]
    }

    mutating func readNDEF() throws(TagReadError) -> NDEFLookup {
        let selectApp = try session.exchange(Self.ndefApplicationSelect, "SELECT NDEF application")
        guard selectApp.isSuccess || selectApp.statusWord >> 8 == 0x61 else {
            throw .noNDEFApplication(statusWord: selectApp.statusWord)
        }

        try select(fileID: 0xE103, name: "SELECT CC file E103")
        // 15 bytes is also the smallest MLe the spec allows, so one read suffices on a conforming tag.
        let ccBytes = try readBinary(offset: 0, count: 15, chunk: 15, name: "READ BINARY CC")
        let cc: Type4CapabilityContainer
        switch Type4CapabilityContainer.parse(ccBytes) {
        case .success(let parsed): cc = parsed
        case .failure(let error): throw error
        }

        try select(fileID: cc.fileID, name: "SELECT NDEF file \(NFCHex.word(cc.fileID))")
        let nlenBytes = try readBinary(offset: 0, count: 2, chunk: 2, name: "READ BINARY NLEN")
        guard nlenBytes.count == 2 else {
            throw .malformedResponse(during: "READ BINARY NLEN", reason: "got \(nlenBytes.count) bytes, need 2")
        }
        let nlen = Int(nlenBytes[0]) << 8 | Int(nlenBytes[1])
        guard nlen > 0 else { return .message([]) }
        guard nlen <= cc.maxFileSize - 2 else { throw .ndefFileTooLarge(nlen: nlen, maxSize: cc.maxFileSize) }
        // The last read must start at an offset a short READ BINARY can address (15 bits).
        guard nlen + 2 <= 0x8000 else { throw .ndefFileTooLarge(nlen: nlen, maxSize: 0x8000) }

        let chunk = max(1, min(cc.maxReadLength, maxReadLength, 255))
        return .message(try readBinary(offset: 2, count: nlen, chunk: chunk, name: "READ BINARY NDEF"))
    }

    /// Reads exactly `count` bytes from `offset` of the selected file, `chunk` bytes at most per APDU.
    /// Callers keep `offset + count <= 0x8000`.
    private mutating func readBinary(
        offset start: Int, count: Int, chunk: Int,
        name: String
    ) throws(TagReadError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        var offset = start
        let end = start + count
        while offset < end {
            let length = min(chunk, end - offset)
            let apdu: [UInt8] = [
                0x00, 0xB0, UInt8(truncatingIfNeeded: offset >> 8),
                UInt8(truncatingIfNeeded: offset), UInt8(truncatingIfNeeded: length),
            ]
            func command() -> String { "\(name) offset \(offset), \(length) bytes (\(NFCHex.bytes(apdu)))" }
            let response = try session.exchange(apdu, command())
            guard response.isSuccess else { throw .statusWord(response.statusWord, during: command()) }
            let returned = response.data.prefix(length)
            guard !returned.isEmpty else {
                throw .malformedResponse(during: command(), reason: "returned no data bytes")
            }
            bytes.append(contentsOf: returned)
            offset += returned.count
        }
        return bytes
    }

    private mutating func select(fileID: UInt16, name: String) throws(TagReadError) {
        let apdu: [UInt8] = [0x00, 0xA4, 0x00, 0x0C, 0x02, UInt8(fileID >> 8), UInt8(fileID & 0xFF)]
        let command = "\(name) (\(NFCHex.bytes(apdu)))"
        let response = try session.exchange(apdu, command)
        guard response.isSuccess else { throw .statusWord(response.statusWord, during: command) }
    }
}
