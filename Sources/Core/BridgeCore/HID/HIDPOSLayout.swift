/// Where a HID POS barcode scanner (HID Point of Sale Usage Tables, usage page 0x8C "Bar Code Scanner") puts a
/// scanned code, found in its report descriptor rather than assumed: the Scanned Data Report's Decoded Data bytes,
/// their byte count, the AIM symbology identifier, the Decode Data Continued flag, and the output bits that sound
/// the scanner's beeper or light its good-read LED. Pure logic.
public struct HIDPOSLayout: Sendable, Equatable {
    /// Usage ids of the Bar Code Scanner page (HID POS Usage Tables 1.02, chapter 7) and the one Generic Desktop
    /// usage a scanned data report uses for its length.
    public enum Usage {
        public static let page: UInt16 = 0x8C
        public static let barCodeScanner: UInt16 = 0x02
        public static let scannedDataReport: UInt16 = 0x12
        public static let goodReadLED: UInt16 = 0x7D
        public static let soundErrorBeep: UInt16 = 0x85
        public static let soundGoodReadBeep: UInt16 = 0x86
        public static let symbologyIdentifier1: UInt16 = 0xFB
        public static let decodedData: UInt16 = 0xFE
        public static let decodeDataContinued: UInt16 = 0xFF
        /// Generic Desktop (page 0x01) Byte Count (0x3B).
        public static let byteCount: UInt32 = 0x0001_003B

        static func full(_ id: UInt16) -> UInt32 { UInt32(page) << 16 | UInt32(id) }
    }

    /// Some bits of a report, counted from the start of the report's data (after its report ID byte, if any).
    public struct Bits: Sendable, Equatable {
        public var offset: Int
        public var size: Int

        /// The unsigned value of these bits in `data` (HID sends fields least significant bit first); nil when
        /// the data is too short.
        public func value(in data: ArraySlice<UInt8>) -> UInt64? {
            guard size <= 64, offset + size <= data.count * 8 else { return nil }
            var value: UInt64 = 0
            for bit in 0..<size {
                let position = offset + bit
                let byte = data[data.startIndex + position / 8]
                if byte >> (position % 8) & 1 == 1 { value |= 1 << UInt64(bit) }
            }
            return value
        }
    }

    /// An output report that sets one or more bits: the bytes to write to the device node.
    public struct OutputBit: Sendable, Equatable {
        public var reportID: UInt8
        /// The report's length in bytes, without its report ID byte.
        public var length: Int
        public var bit: Bits

        /// The report with only this bit set, report ID byte first when the device numbers its reports.
        public var report: [UInt8] {
            var data = [UInt8](repeating: 0, count: length)
            for index in bit.offset..<(bit.offset + bit.size) where index / 8 < length {
                data[index / 8] |= 1 << UInt8(index % 8)
            }
            return reportID == 0 ? data : [reportID] + data
        }
    }

    /// The Scanned Data Report's id; 0 when the device numbers no reports.
    public var reportID: UInt8
    /// The Scanned Data Report's length in bytes, without its report ID byte.
    public var reportLength: Int
    /// The Decoded Data bytes (byte aligned; zero-padded after the code).
    public var data: Bits
    /// How many of the data bytes are the code's, when the report says (Generic Desktop Byte Count).
    public var byteCount: Bits?
    /// The AIM symbology identifier's characters (Symbology Identifier 1, 2, 3), those the report has.
    public var symbology: [Bits]
    /// Set when the code goes on in the next report.
    public var continued: Bits?
    /// The longest input report of the whole device, report ID byte included: a read of this size gets any report
    /// whole.
    public var maximumInputLength: Int
    /// Output bits, where the descriptor has them.
    public var goodReadBeep: OutputBit?
    public var errorBeep: OutputBit?
    public var goodReadLED: OutputBit?

    /// Why a descriptor is not a HID POS scanner's, in words for `scanners` and the log.
    public struct NotAScanner: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Finds the layout in a parsed descriptor: an application collection Bar Code Scanner (0x8C:0x02) with an input
    /// field Decoded Data (0x8C:0xFE) of bytes inside a Scanned Data Report collection (0x8C:0x12). A vendor's
    /// second interface (page 0xFF8C and the like) and a keyboard are not.
    public static func find(in descriptor: HIDReportDescriptor) -> Result<HIDPOSLayout, NotAScanner> {
        let scanner = HIDReportDescriptor.Collection(kind: 1, usagePage: Usage.page, usage: Usage.barCodeScanner)
        guard descriptor.applications.contains(scanner) else {
            let pages = Set(descriptor.applications.map(\.usagePage)).sorted().map { page4($0) }
            return .failure(
                NotAScanner(
                    description: "no Bar Code Scanner collection (usage page 0x8C); its applications: "
                        + (pages.isEmpty ? "none" : "usage page " + pages.joined(separator: ", "))))
        }
        func inScanner(_ field: HIDReportDescriptor.Field) -> Bool {
            field.collections.first { $0.kind == 1 } == scanner
        }
        let decoded = descriptor.fields.first {
            $0.kind == .input && inScanner($0) && $0.usages.contains(Usage.full(Usage.decodedData))
                && $0.collections.contains { $0.usagePage == Usage.page && $0.usage == Usage.scannedDataReport }
        }
        guard let decoded else {
            return .failure(NotAScanner(description: "a Bar Code Scanner collection without a Scanned Data Report"))
        }
        guard decoded.reportSize == 8, decoded.bitOffset % 8 == 0, decoded.reportCount > 0 else {
            return .failure(NotAScanner(description: "its Decoded Data field is not a string of bytes"))
        }
        let report = descriptor.fields(.input, reportID: decoded.reportID)
        /// Where `usage` sits in the report: a variable field gives each of its usages one item, in order.
        func bits(_ usage: UInt32, in fields: [HIDReportDescriptor.Field]) -> Bits? {
            for field in fields where !field.isConstant {
                guard let index = field.usages.firstIndex(of: usage), index < field.reportCount else { continue }
                return Bits(offset: field.bitOffset + index * field.reportSize, size: field.reportSize)
            }
            return nil
        }
        let symbology = (0..<3).compactMap { bits(Usage.full(Usage.symbologyIdentifier1 + UInt16($0)), in: report) }
        var longest = 0
        for field in descriptor.fields where field.kind == .input {
            longest = max(longest, (field.bitOffset + field.bitCount + 7) / 8 + (field.reportID == 0 ? 0 : 1))
        }
        var layout = HIDPOSLayout(
            reportID: decoded.reportID, reportLength: ((report.map { $0.bitOffset + $0.bitCount }.max() ?? 0) + 7) / 8,
            data: Bits(offset: decoded.bitOffset, size: decoded.bitCount),
            byteCount: bits(Usage.byteCount, in: report), symbology: symbology.count == 3 ? symbology : [],
            continued: bits(Usage.full(Usage.decodeDataContinued), in: report), maximumInputLength: longest)
        func output(_ id: UInt16) -> OutputBit? {
            let usage = Usage.full(id)
            guard
                let field = descriptor.fields.first(where: {
                    $0.kind == .output && inScanner($0) && $0.usages.contains(usage)
                })
            else { return nil }
            let fields = descriptor.fields(.output, reportID: field.reportID)
            guard let bit = bits(usage, in: fields) else { return nil }
            let length = ((fields.map { $0.bitOffset + $0.bitCount }.max() ?? 0) + 7) / 8
            return OutputBit(reportID: field.reportID, length: length, bit: bit)
        }
        layout.goodReadBeep = output(Usage.soundGoodReadBeep)
        layout.errorBeep = output(Usage.soundErrorBeep)
        layout.goodReadLED = output(Usage.goodReadLED)
        return .success(layout)
    }

    static func page4(_ page: UInt16) -> String {
        let digits = Array("0123456789ABCDEF")
        return "0x" + (0..<4).reversed().map { String(digits[Int(page >> UInt16(4 * $0) & 0xF)]) }.joined()
    }
}

/// Puts the codes of a HID POS scanner together from its reports: the data bytes of one Scanned Data Report, or of
/// several when Decode Data Continued is set, byte-exact (GS and other controls kept), with the AIM symbology
/// identifier of the first. Reports of other ids (a trigger's status, a vendor's) are not codes and are passed over.
/// Pure logic: the reader thread feeds it each report read from the device node.
public struct HIDPOSAssembler: Sendable {
    public enum Output: Sendable, Equatable {
        case code([UInt8], symbology: String?)
        /// A code or report that could not be used, and why (for a one-line warning).
        case discarded(String)
    }

    public let layout: HIDPOSLayout
    /// The longest code kept: a memory bound against a device that never clears Decode Data Continued (the longest
    /// QR code holds 7,089 digits).
    public let maxLength: Int
    /// How long the next report of a continued code may take: they follow each other at the USB polling rate.
    public let continuationTimeout: Double
    private var pending: [UInt8] = []
    private var pendingSymbology: String?
    private var deadline: Double?
    private var overflowed = false

    public init(layout: HIDPOSLayout, maxLength: Int = 65_536, continuationTimeout: Double = 1) {
        self.layout = layout
        self.maxLength = maxLength
        self.continuationTimeout = continuationTimeout
    }

    /// When an unfinished code is given up (monotonic seconds); nil when none is.
    public func pendingDeadline() -> Double? { deadline }

    /// An unfinished code whose next report did not come in time, discarded.
    public mutating func tick(now: Double) -> Output? {
        guard let deadline, now >= deadline else { return nil }
        let count = pending.count
        reset()
        return .discarded("a code cut short: \(count) bytes, then no report for \(continuationTimeout) s")
    }

    /// One report as read from the device node (report ID byte first when the device numbers its reports).
    public mutating func feed(_ report: [UInt8], now: Double) -> [Output] {
        var outputs: [Output] = []
        if let stale = tick(now: now) { outputs.append(stale) }
        var body = report[...]
        if layout.reportID != 0 {
            guard body.first == layout.reportID else { return outputs }  // another report: not a code
            body = body.dropFirst()
        }
        guard body.count >= layout.reportLength else {
            let count = pending.count
            reset()
            return outputs + [
                .discarded(
                    "a scanned data report of \(body.count) bytes; its descriptor says \(layout.reportLength)"
                        + (count > 0 ? " (and the \(count) bytes before it)" : ""))
            ]
        }
        let first = body.startIndex + layout.data.offset / 8
        var data = Array(body[first..<(first + layout.data.size / 8)])
        if let field = layout.byteCount, let count = field.value(in: body) {
            guard count <= data.count else {
                reset()
                return outputs + [.discarded("a byte count of \(count) in a report with room for \(data.count)")]
            }
            data.removeLast(data.count - Int(count))
        } else {
            // No byte count: the field is padded with zeros after the code.
            while data.last == 0 { data.removeLast() }
        }
        if pending.isEmpty && !overflowed { pendingSymbology = HIDPOSAssembler.symbology(layout, body) }
        if pending.count + data.count > maxLength { overflowed = true }
        if !overflowed { pending += data }
        if let flag = layout.continued, (flag.value(in: body) ?? 0) & 1 == 1 {
            deadline = now + continuationTimeout
            return outputs
        }
        defer { reset() }
        if overflowed { return outputs + [.discarded("a code longer than \(maxLength) bytes")] }
        if pending.isEmpty { return outputs + [.discarded("an empty scanned data report")] }
        return outputs + [.code(pending, symbology: pendingSymbology)]
    }

    private mutating func reset() {
        pending = []
        pendingSymbology = nil
        deadline = nil
        overflowed = false
    }

    /// The AIM identifier (ISO/IEC 15424: `]`, a code character, a modifier character) the report carries; nil when
    /// it carries none or something else (zeros from a scanner set not to send it).
    static func symbology(_ layout: HIDPOSLayout, _ body: ArraySlice<UInt8>) -> String? {
        let bytes = layout.symbology.compactMap { $0.size == 8 ? $0.value(in: body).map(UInt8.init) : nil }
        guard bytes.count == 3, bytes[0] == UInt8(ascii: "]"), bytes[1...].allSatisfy({ (0x21...0x7E).contains($0) })
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
