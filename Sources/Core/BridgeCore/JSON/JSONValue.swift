/// A JSON value with object keys kept in insertion order.
///
/// We carry our own JSON type instead of `JSONSerialization` because the wire formats here are contracts:
/// key order and number spelling of the resolveIdentifier input must be byte-stable (golden tests, idempotent
/// replays), and config validation must tell `true` from `1`, which `NSNumber` blurs on Linux.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// An integer literal (no fraction or exponent) that fits in `Int`.
    case integer(Int)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.integer(let a), .number(let b)), (.number(let b), .integer(let a)): return Double(a) == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The value for `key` when this is an object (the last one wins if a key repeats).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .number(let d): return d
        default: return nil
        }
    }

    public var intValue: Int? {
        switch self {
        case .integer(let i): return i
        case .number(let d) where d.rounded() == d && abs(d) < 9e15: return Int(d)
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A short name of the value's type, for error messages ("expected a number, got a string").
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .integer, .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSONValue {
    /// The object without its member `key` (anything else unchanged): `status` compared without `updatedAt`.
    public func removing(key: String) -> JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(members.filter { $0.0 != key })
    }
}
