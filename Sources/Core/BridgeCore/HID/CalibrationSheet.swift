/// The printable scanner calibration sheet (`scanners --calibration-sheet`, issue 26): the calibration code and
/// three codes a bench checks its scanners with. Pure: the QR modules come in from libqrencode, the SVG and PNG
/// bytes go out.
public enum CalibrationSheet {
    public struct Code: Sendable, Equatable {
        public var title: String
        public var text: String
        /// Modules per side, and `width * width` modules row by row (true: dark).
        public var width: Int
        public var modules: [Bool]

        public init(title: String, text: String, width: Int, modules: [Bool]) {
            self.title = title
            self.text = text
            self.width = width
            self.modules = modules
        }
    }

    /// What the sheet holds, in order: title and exact text.
    public static let contents: [(title: String, text: String)] = [
        ("1. Calibration: scanners --calibrate", LayoutCalibration.text),
        ("2. A Plings URL", "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVW&p=4.2.3.3.6"),
        // GTIN, expiry date, batch; the variable-length batch ends with the GS separator (GS1 General
        // Specifications, section 7.8.5.3) before the next element string.
        ("3. GS1, with a GS separator", "01095011010209171719050810ABCD1234\u{1D}21XYZ9876"),
        (
            "4. A long URL",
            "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJKRzVT9ZpXw3LmQeTy4pEx7Zr2MnRead42KxQR7hbK2mXw"
                + "&p=4.2.3.3.6.7.8.9.10.11.12.13.14.15.16.17.18.19.20&cp=K7hbK2mXw9ZpXw3LmQeTy4pEx7Zr2"
        ),
    ]

    /// Quiet zone around each symbol, in modules (ISO/IEC 18004, section 9.1: at least 4).
    static let quietZone = 4

    /// An A4 page (mm): the codes two by two, each with its title and its text (control characters shown as
    /// `<GS>` and the like), 0.75 mm modules (a handheld scanner reads them from 5 to 30 cm). All text is
    /// escaped for XML.
    public static func svg(_ codes: [Code]) -> String {
        var body = ""
        let cell = (width: 95.0, height: 105.0)
        for (index, code) in codes.enumerated() {
            let x = 10.0 + Double(index % 2) * (cell.width + 0)
            let y = 20.0 + Double(index / 2) * cell.height
            let side = Double(code.width + 2 * quietZone)
            let size = min(85.0, side * 0.75)
            let module = size / side
            body += "<g transform=\"translate(\(fmt(x)) \(fmt(y)))\">\n"
            body += "<text x=\"0\" y=\"4\" font-size=\"4\" font-family=\"sans-serif\">\(xml(code.title))</text>\n"
            body += "<g transform=\"translate(0 8) scale(\(fmt(module)))\">"
            body += "<rect width=\"\(Int(side))\" height=\"\(Int(side))\" fill=\"#fff\"/>"
            body += "<path fill=\"#000\" d=\"" + path(code) + "\"/></g>\n"
            let caption = visible(code.text)
            var line = 0
            var start = caption.startIndex
            while start < caption.endIndex, line < 6 {
                let end = caption.index(start, offsetBy: 52, limitedBy: caption.endIndex) ?? caption.endIndex
                body +=
                    "<text x=\"0\" y=\"\(fmt(8 + size + 5 + Double(line) * 3.2))\" font-size=\"2.6\" "
                    + "font-family=\"monospace\">\(xml(String(caption[start..<end])))</text>\n"
                start = end
                line += 1
            }
            body += "</g>\n"
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="210mm" height="297mm" viewBox="0 0 210 297">
            <rect width="210" height="297" fill="#fff"/>
            <text x="10" y="12" font-size="6" font-family="sans-serif">plings-bridge scanner calibration sheet</text>
            \(body)</svg>

            """
    }

    /// One path of unit squares for the dark modules, offset by the quiet zone (runs along a row merged).
    static func path(_ code: Code) -> String {
        var d = ""
        for row in 0..<code.width {
            var column = 0
            while column < code.width {
                guard code.modules[row * code.width + column] else {
                    column += 1
                    continue
                }
                var run = 1
                while column + run < code.width, code.modules[row * code.width + column + run] { run += 1 }
                d += "M\(column + quietZone) \(row + quietZone)h\(run)v1h-\(run)z"
                column += run
            }
        }
        return d
    }

    /// The same codes as a grayscale PNG, one under the other, `scale` pixels per module.
    public static func png(_ codes: [Code], scale: Int = 4) -> [UInt8] {
        let sides = codes.map { ($0.width + 2 * quietZone) * scale }
        let width = sides.max() ?? 1
        let height = max(1, sides.reduce(0, +))
        var pixels = [UInt8](repeating: 255, count: width * height)
        var top = 0
        for (code, side) in zip(codes, sides) {
            for row in 0..<code.width {
                for column in 0..<code.width where code.modules[row * code.width + column] {
                    for dy in 0..<scale {
                        let y = top + (row + quietZone) * scale + dy
                        let x = (column + quietZone) * scale
                        for dx in 0..<scale { pixels[y * width + x + dx] = 0 }
                    }
                }
            }
            top += side
        }
        return PNGImage.grayscale(width: width, height: height, pixels: pixels)
    }

    /// Control characters as `<GS>`-style names, so the printed text says what the code holds.
    static func visible(_ text: String) -> String {
        String(
            text.unicodeScalars.map { scalar -> String in
                switch scalar.value {
                case 0x1D: return "<GS>"
                case 0..<0x20, 0x7F: return "<\(String(scalar.value, radix: 16, uppercase: true))>"
                default: return String(scalar)
                }
            }.joined())
    }

    static func xml(_ text: String) -> String { MarkupText.escape(text) }

    static func fmt(_ value: Double) -> String { MarkupText.number(value) }
}

/// A minimal PNG writer (the PNG specification, ISO/IEC 15948): 8-bit grayscale, no filter, the image data in
/// stored (uncompressed) deflate blocks inside a zlib stream (RFC 1950, RFC 1951 section 3.2.4), CRC-32 per chunk.
/// Large but exact; a printed sheet does not need compression.
public enum PNGImage {
    public static func grayscale(width: Int, height: Int, pixels: [UInt8]) -> [UInt8] {
        var raw: [UInt8] = []
        raw.reserveCapacity((width + 1) * height)
        for row in 0..<height {
            raw.append(0)  // filter type None
            raw += pixels[row * width..<(row + 1) * width]
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65_535, raw.count - offset)
            let final: UInt8 = offset + count >= raw.count ? 1 : 0
            zlib += [final, UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
            zlib += raw[offset..<offset + count]
            offset += count
        } while offset < raw.count
        zlib += bigEndian(adler32(raw))
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png += chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 0, 0, 0, 0])
        png += chunk("IDAT", zlib)
        png += chunk("IEND", [])
        return png
    }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return b << 16 | a
    }
}
