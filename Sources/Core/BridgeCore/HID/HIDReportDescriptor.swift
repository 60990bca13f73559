/// A HID report descriptor (Device Class Definition for HID 1.11, section 6.2.2) parsed into the fields of its
/// reports: for each Input, Output and Feature main item, the report it belongs to, where its bits start, its
/// size and count, its usages and the collections around it. Pure logic: the bytes come from sysfs
/// `report_descriptor` or a test.
///
/// Short items only carry data: a prefix byte (bits 0-1 size 0, 1, 2 or 4 bytes; bits 2-3 type main, global,
/// local; bits 4-7 tag) and that many little-endian bytes. Long items (prefix 0xFE) are skipped by their size.
/// Global items persist (Push and Pop save and restore them); local items apply to the next main item only.
public struct HIDReportDescriptor: Sendable, Equatable {
    public enum ReportKind: Sendable, Equatable {
        case input
        case output
        case feature
    }

    /// One collection: its kind (0 physical, 1 application, 2 logical, ... section 6.2.2.6) and usage.
    public struct Collection: Sendable, Equatable {
        public var kind: UInt8
        public var usagePage: UInt16
        public var usage: UInt16
    }

    /// One main item's field.
    public struct Field: Sendable, Equatable {
        public var kind: ReportKind
        /// 0 when the descriptor declares no report IDs.
        public var reportID: UInt8
        /// Where the field starts in its report, after the report ID byte (when there is one).
        public var bitOffset: Int
        public var reportSize: Int
        public var reportCount: Int
        public var usagePage: UInt16
        /// The usages of the field's items, in order (a Usage Minimum/Maximum range expanded). Each is the full
        /// 32-bit usage: page << 16 | id.
        public var usages: [UInt32]
        /// Constant (padding), as opposed to data (bit 0 of the main item's data).
        public var isConstant: Bool
        /// Variable (one value per usage), as opposed to array (indices into the usages) (bit 1).
        public var isVariable: Bool
        /// Buffered bytes: a byte stream, as opposed to a bit field (bit 8).
        public var isBufferedBytes: Bool
        /// The collections around the field, outermost first.
        public var collections: [Collection]
        public var logicalMinimum: Int32
        public var logicalMaximum: Int32

        /// The field's size in bits.
        public var bitCount: Int { reportSize * reportCount }
    }

    /// Why a descriptor could not be read.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public var offset: Int
        public var description: String { "report descriptor byte \(offset): \(reason)" }
    }

    public var fields: [Field]
    /// Every application collection, in order (a scanner with a keyboard and a POS interface has both).
    public var applications: [Collection]

    /// The largest descriptor the HID core accepts (HID_MAX_DESCRIPTOR_SIZE in the kernel's hid.h).
    public static let maximumSize = 4096

    /// Parses `bytes`; a truncated item, a Pop without a Push, an End Collection without a collection or a report
    /// larger than any USB transfer is a `Failure`.
    public static func parse(_ bytes: [UInt8]) -> Result<HIDReportDescriptor, Failure> {
        guard bytes.count <= maximumSize else {
            return .failure(Failure(reason: "longer than \(maximumSize) bytes", offset: maximumSize))
        }
        struct Globals {
            var usagePage: UInt16 = 0
            var logicalMinimum: Int32 = 0
            var logicalMaximum: Int32 = 0
            var reportSize = 0
            var reportID: UInt8 = 0
            var reportCount = 0
        }
        var globals = Globals()
        var stack: [Globals] = []
        var usages: [UInt32] = []
        var usageMinimum: UInt32?
        var collections: [Collection] = []
        var result = HIDReportDescriptor(fields: [], applications: [])
        // Bits used so far in each report, by kind and report ID.
        var offsets: [String: Int] = [:]
        var index = 0
        while index < bytes.count {
            let prefix = bytes[index]
            let start = index
            if prefix == 0xFE {
                guard index + 2 < bytes.count else {
                    return .failure(Failure(reason: "long item cut short", offset: start))
                }
                index += 3 + Int(bytes[index + 1])
                guard index <= bytes.count else {
                    return .failure(Failure(reason: "long item cut short", offset: start))
                }
                continue
            }
            let size = [0, 1, 2, 4][Int(prefix & 0x03)]
            guard index + 1 + size <= bytes.count else {
                return .failure(Failure(reason: "item \(hex(prefix)) cut short", offset: start))
            }
            var unsigned: UInt32 = 0
            for (shift, byte) in bytes[(index + 1)..<(index + 1 + size)].enumerated() {
                unsigned |= UInt32(byte) << (8 * shift)
            }
            // Logical extents are signed: the value sign-extended from its own size.
            let signed: Int32 =
                switch size {
                case 1: Int32(Int8(truncatingIfNeeded: unsigned))
                case 2: Int32(Int16(truncatingIfNeeded: unsigned))
                default: Int32(bitPattern: unsigned)
                }
            index += 1 + size
            let type = (prefix >> 2) & 0x03
            let tag = prefix >> 4
            switch (type, tag) {
            // Main items.
            case (0, 0x8), (0, 0x9), (0, 0xB):
                let kind: ReportKind = tag == 0x8 ? .input : tag == 0x9 ? .output : .feature
                let key = "\(kind)-\(globals.reportID)"
                let offset = offsets[key, default: 0]
                // Report Size and Report Count are each up to 32 bits wide: their product can overflow.
                let (bits, overflow) = globals.reportSize.multipliedReportingOverflow(by: globals.reportCount)
                guard !overflow, bits <= 8 * 65_536 else {
                    return .failure(
                        Failure(
                            reason: "a field of \(globals.reportCount) items of \(globals.reportSize) bits",
                            offset: start))
                }
                if let minimum = usageMinimum { usages.append(minimum) }  // a Minimum without a Maximum
                result.fields.append(
                    Field(
                        kind: kind, reportID: globals.reportID, bitOffset: offset, reportSize: globals.reportSize,
                        reportCount: globals.reportCount, usagePage: globals.usagePage, usages: usages,
                        isConstant: unsigned & 0x01 != 0, isVariable: unsigned & 0x02 != 0,
                        isBufferedBytes: unsigned & 0x100 != 0, collections: collections,
                        logicalMinimum: globals.logicalMinimum, logicalMaximum: globals.logicalMaximum))
                offsets[key] = offset + bits
                usages = []
                usageMinimum = nil
            case (0, 0xA):
                let usage = usages.first ?? (UInt32(globals.usagePage) << 16)
                let collection = Collection(
                    kind: UInt8(truncatingIfNeeded: unsigned), usagePage: UInt16(usage >> 16),
                    usage: UInt16(truncatingIfNeeded: usage))
                collections.append(collection)
                if collection.kind == 1 { result.applications.append(collection) }
                usages = []
                usageMinimum = nil
            case (0, 0xC):
                guard !collections.isEmpty else {
                    return .failure(Failure(reason: "End Collection without a collection", offset: start))
                }
                collections.removeLast()
            // Global items.
            case (1, 0x0): globals.usagePage = UInt16(truncatingIfNeeded: unsigned)
            case (1, 0x1): globals.logicalMinimum = signed
            case (1, 0x2): globals.logicalMaximum = size == 0 ? 0 : signed
            case (1, 0x7): globals.reportSize = Int(unsigned)
            case (1, 0x8):
                guard unsigned != 0, unsigned <= 0xFF else {
                    return .failure(Failure(reason: "report ID \(unsigned)", offset: start))
                }
                globals.reportID = UInt8(unsigned)
            case (1, 0x9): globals.reportCount = Int(unsigned)
            case (1, 0xA): stack.append(globals)
            case (1, 0xB):
                guard let saved = stack.popLast() else {
                    return .failure(Failure(reason: "Pop without a Push", offset: start))
                }
                globals = saved
            // Local items: a 4-byte usage carries its own page; a shorter one takes the current Usage Page.
            case (2, 0x0): usages.append(size == 4 ? unsigned : UInt32(globals.usagePage) << 16 | unsigned)
            case (2, 0x1): usageMinimum = size == 4 ? unsigned : UInt32(globals.usagePage) << 16 | unsigned
            case (2, 0x2):
                let maximum = size == 4 ? unsigned : UInt32(globals.usagePage) << 16 | unsigned
                if let minimum = usageMinimum, minimum <= maximum, maximum - minimum < 65_536 {
                    usages.append(contentsOf: minimum...maximum)
                }
                usageMinimum = nil
            default:
                break  // physical extents, units, designators, strings, delimiters: nothing we need
            }
        }
        return .success(result)
    }

    /// The fields of one kind of report with `reportID`, in order.
    public func fields(_ kind: ReportKind, reportID: UInt8) -> [Field] {
        fields.filter { $0.kind == kind && $0.reportID == reportID }
    }

    static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
