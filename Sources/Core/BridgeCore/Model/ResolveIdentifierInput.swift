import Foundation

/// Builds the `resolveIdentifier` input (docs/contracts.md, "resolveIdentifier input"), exactly as the Plings iOS
/// app sends it.
public enum ResolveIdentifierInput {
    /// The input object: `type`, `identifier`, `path`, `classPointer` (omitted when absent) and `scanMetadata`
    /// with `timestamp` and, only when a valid fix is given, `geoLocation` with `consent: true`.
    public static func build(_ id: PlingsIdentifier, time: Date, fix: LocationFix?) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("type", .string(id.type.rawValue)),
            ("identifier", .string(id.identifier)),
            ("path", .string(id.path)),
        ]
        if let cp = id.classPointer { members.append(("classPointer", .string(cp))) }
        var metadata: [(String, JSONValue)] = [("timestamp", .string(Timestamp.format(time)))]
        if let fix, fix.isValid {
            var geo: [(String, JSONValue)] = [
                ("latitude", .number(fix.latitude)), ("longitude", .number(fix.longitude)),
            ]
            if let accuracy = fix.accuracy { geo.append(("accuracy", .number(accuracy))) }
            // Sharing a position is only ever done with consent; no fix (or location disabled) omits the object.
            geo.append(("consent", .bool(true)))
            metadata.append(("geoLocation", .object(geo)))
        }
        members.append(("scanMetadata", .object(metadata)))
        return .object(members)
    }
}

/// The HTTP request body (docs/contracts.md, "HTTP request").
public enum GraphQLRequestBody {
    public static let defaultDocument =
        "mutation ResolveIdentifier($input: ResolveIdentifierInput!) { resolveIdentifier(input: $input) { __typename } }"
    public static let operationName = "ResolveIdentifier"

    /// `{"query": document, "variables": {"input": input}, "operationName": "ResolveIdentifier"}`.
    public static func build(document: String, input: JSONValue) -> JSONValue {
        .object([
            ("query", .string(document)),
            ("variables", .object([("input", input)])),
            ("operationName", .string(operationName)),
        ])
    }

    /// The same, around an input already serialised in the spool (avoids re-parsing it on every delivery).
    public static func build(document: String, inputJSON: String) -> String {
        var out = "{\"query\":"
        JSONValue.writeString(document, to: &out)
        out += ",\"variables\":{\"input\":"
        out += inputJSON
        out += "},\"operationName\":\"ResolveIdentifier\"}"
        return out
    }
}
