import CQREncode

/// A QR Code symbol from libqrencode (Debian `libqrencode-dev`): its modules, dark or light, row by row.
public struct QRCodeMatrix: Sendable, Equatable {
    /// Modules per side.
    public let width: Int
    /// `width * width` modules, row by row; true is dark.
    public let modules: [Bool]

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Encodes `bytes` exactly (8-bit mode: a GS separator or any other byte stays as it is), at error correction
    /// level M, in the smallest version that holds them.
    public static func encode(_ bytes: [UInt8]) throws(Failure) -> QRCodeMatrix {
        guard !bytes.isEmpty else { throw Failure(description: "nothing to encode") }
        guard let code = QRcode_encodeData(Int32(bytes.count), bytes, 0, QR_ECLEVEL_M) else {
            throw Failure(description: "libqrencode cannot encode \(bytes.count) bytes (too long for a QR Code?)")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        // Bit 0 of each byte is the module's colour (qrencode.h, "QRcode": 1 = black).
        let modules = (0..<width * width).map { code.pointee.data[$0] & 1 == 1 }
        return QRCodeMatrix(width: width, modules: modules)
    }

    public func isDark(row: Int, column: Int) -> Bool { modules[row * width + column] }
}
