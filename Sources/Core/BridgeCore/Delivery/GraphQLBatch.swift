/// Several scans in one request (docs/contracts.md, "Batched request"): the configured document's one
/// `resolveIdentifier` field repeated under the aliases `s0`, `s1`, ..., each with its own variable `$i0`, `$i1`, ...
///
/// GraphQL executes the root fields of a mutation one after another, in document order (the GraphQL
/// specification, "Mutation": serial execution), and reports each field's result and errors under its alias, so
/// each scan of a batch gets an answer of its own. Pure: the forwarder does the I/O.
public struct GraphQLBatchTemplate: Sendable, Equatable {
    /// The type of the document's `$input` variable as written (`ResolveIdentifierInput!`).
    public let inputType: String
    /// The selection set of the document's `resolveIdentifier` field as written (`{ __typename }`), or "".
    public let selection: String
    /// Fragment definitions that follow the operation, sent once after the batched operation.
    public let trailer: String

    /// The batched operation's name, in the request's `operationName`.
    public static let operationName = "ResolveIdentifiers"

    /// The template of `document`, or nil when the document is not one mutation whose only root field is
    /// `resolveIdentifier(input: $input)` (such a document is sent one scan per request, as written).
    public init?(document: String) {
        guard let tokens = GraphQLLexer.tokens(document) else { return nil }
        var parser = TemplateParser(source: Array(document.utf8), tokens: tokens)
        guard let (inputType, selection, trailer) = parser.parse() else { return nil }
        self.inputType = inputType
        self.selection = selection
        self.trailer = trailer
    }

    /// The alias of the `index`-th scan's field.
    public static func alias(_ index: Int) -> String { "s\(index)" }

    /// The batched document for `count` scans.
    public func document(count: Int) -> String {
        var out = "mutation \(GraphQLBatchTemplate.operationName)("
        out += (0..<count).map { "$i\($0): \(inputType)" }.joined(separator: ", ")
        out += ") {"
        for index in 0..<count {
            out += " \(GraphQLBatchTemplate.alias(index)): resolveIdentifier(input: $i\(index))"
            if !selection.isEmpty { out += " " + selection }
        }
        out += " }"
        if !trailer.isEmpty { out += " " + trailer }
        return out
    }

    /// The request body for inputs already serialised in the spool, in batch order:
    /// `{"query": document, "variables": {"i0": input0, ...}, "operationName": "ResolveIdentifiers"}`.
    public func body(inputsJSON: [String]) -> String {
        var out = "{\"query\":"
        JSONValue.writeString(document(count: inputsJSON.count), to: &out)
        out += ",\"variables\":{"
        for (index, input) in inputsJSON.enumerated() {
            if index > 0 { out += "," }
            out += "\"i\(index)\":" + input
        }
        out += "},\"operationName\":\"\(GraphQLBatchTemplate.operationName)\"}"
        return out
    }
}

/// What the answer to a batched request means for its scans (docs/contracts.md, "Batched request").
public enum BatchAnswer: Sendable, Equatable {
    /// One outcome for every scan of the batch (no answer, a 401, a 5xx...): a retry keeps the batch's members
    /// and its `Idempotency-Key`.
    case whole(DeliveryOutcome)
    /// The API refused the batched request as such (HTTP 400/404/413/422, or a request-level validation
    /// error): nothing was executed; the scans go one per request.
    case refused(reason: String)
    /// One outcome per scan, in batch order, each classified as a single request's answer would be.
    case each([DeliveryOutcome])
}

extension DeliveryClassifier {
    /// Classifies the answer to a batch of `count` scans. Each field's answer is rewritten as the answer of a
    /// single request (`{"data":{"resolveIdentifier":…},"errors":[…]}`, the errors' paths starting at
    /// `resolveIdentifier`) and classified by `classify`, so one scan's outcome and kept response are the same
    /// whether it went alone or in a batch.
    public static func classifyBatch(
        status: Int, retryAfterHeader: String?, body: [UInt8], location: String? = nil, secrets: [String] = [],
        count: Int
    ) -> BatchAnswer {
        let clean = cleaned(body, secrets: secrets)
        let whole = classify(
            status: status, retryAfterHeader: retryAfterHeader, cleanBody: clean, location: location, secrets: secrets)
        guard (200..<300).contains(status), let json = try? JSONParser.parse(clean) else {
            if case .dead(let reason, _) = whole { return .refused(reason: reason) }
            return .whole(whole)
        }
        var fieldErrors = [[JSONValue]](repeating: [], count: count)
        var requestErrors: [JSONValue] = []
        if case .array(let errors)? = json["errors"] {
            for error in errors {
                if case .array(let path)? = error["path"], let first = path.first?.stringValue,
                    let index = batchIndex(first, count: count)
                {
                    fieldErrors[index].append(error.replacingPathHead(with: "resolveIdentifier"))
                } else {
                    requestErrors.append(error)
                }
            }
        }
        // No data: nothing was executed (the document or the variables were refused), or the server failed.
        guard case .object = json["data"] else {
            if case .dead(let reason, _) = whole { return .refused(reason: reason) }
            return .whole(whole)
        }
        let authRefused = requestErrors.contains { error in
            error["extensions"]?["code"]?.stringValue.map { authCodes.contains($0.uppercased()) } ?? false
        }
        if authRefused, case .authPaused = whole { return .whole(whole) }
        var outcomes: [DeliveryOutcome] = []
        for index in 0..<count {
            let value = json["data"]?[GraphQLBatchTemplate.alias(index)] ?? .null
            // A request-level error concerns every field that has no result.
            let errors = fieldErrors[index] + (value.isNull ? requestErrors : [])
            var single: [(String, JSONValue)] = [("data", .object([("resolveIdentifier", value)]))]
            if !errors.isEmpty { single.append(("errors", .array(errors))) }
            // Each field's answer is redacted again on purpose (a small body): it is re-encoded from the parsed
            // values, and a secret must not survive in a spelling the whole body's cleaning did not produce.
            outcomes.append(
                classify(
                    status: status, retryAfterHeader: retryAfterHeader,
                    body: Array(JSONValue.object(single).encoded().utf8),
                    secrets: secrets))
        }
        return .each(outcomes)
    }

    /// `s<k>` with k < count, else nil.
    private static func batchIndex(_ alias: String, count: Int) -> Int? {
        guard alias.hasPrefix("s"), let index = Int(alias.dropFirst()), index >= 0, index < count,
            alias == GraphQLBatchTemplate.alias(index)
        else { return nil }
        return index
    }
}

extension JSONValue {
    /// A GraphQL error with the first element of its `path` replaced.
    fileprivate func replacingPathHead(with head: String) -> JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(
            members.map { key, value in
                guard key == "path", case .array(var path) = value, !path.isEmpty else { return (key, value) }
                path[0] = .string(head)
                return (key, .array(path))
            })
    }
}

/// GraphQL's lexical tokens (the GraphQL specification, "Language: Source Text"), enough to find the parts of a
/// document: names, punctuators, and the values it may hold, with where each token is in the source. Commas,
/// white space, line terminators and comments are ignored tokens, as the specification says.
enum GraphQLLexer {
    struct Token: Equatable {
        enum Kind: Equatable { case name, punctuator, number, string }
        var kind: Kind
        var text: String
        /// Byte offsets of the token in the source.
        var start: Int
        var end: Int
    }

    /// The tokens of `source`, or nil when it is not lexically valid GraphQL.
    static func tokens(_ source: String) -> [Token]? {
        let bytes = Array(source.utf8)
        var tokens: [Token] = []
        var i = 0
        func isNameStart(_ b: UInt8) -> Bool { b == 95 || (65...90).contains(b) || (97...122).contains(b) }
        func isDigit(_ b: UInt8) -> Bool { (48...57).contains(b) }
        while i < bytes.count {
            let b = bytes[i]
            let start = i
            switch b {
            case 0x20, 0x09, 0x0A, 0x0D, 0x2C:  // space, tab, line terminators, comma
                i += 1
                continue
            case 0xEF where i + 2 < bytes.count && bytes[i + 1] == 0xBB && bytes[i + 2] == 0xBF:  // BOM
                i += 3
                continue
            case 0x23:  // # comment to the end of the line
                while i < bytes.count, bytes[i] != 0x0A, bytes[i] != 0x0D { i += 1 }
                continue
            case 0x2E:  // ...
                guard i + 2 < bytes.count, bytes[i + 1] == 0x2E, bytes[i + 2] == 0x2E else { return nil }
                i += 3
                tokens.append(Token(kind: .punctuator, text: "...", start: start, end: i))
                continue
            case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "("), UInt8(ascii: ")"),
                UInt8(ascii: ":"), UInt8(ascii: "="), UInt8(ascii: "@"), UInt8(ascii: "["), UInt8(ascii: "]"),
                UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"):
                i += 1
                tokens.append(Token(kind: .punctuator, text: String(UnicodeScalar(b)), start: start, end: i))
                continue
            case 0x22:  // a string or a block string
                if i + 2 < bytes.count, bytes[i + 1] == 0x22, bytes[i + 2] == 0x22 {
                    i += 3
                    while true {
                        guard i < bytes.count else { return nil }
                        if bytes[i] == 0x5C, i + 3 < bytes.count, bytes[i + 1] == 0x22, bytes[i + 2] == 0x22,
                            bytes[i + 3] == 0x22
                        {
                            i += 4
                        } else if bytes[i] == 0x22, i + 2 < bytes.count, bytes[i + 1] == 0x22, bytes[i + 2] == 0x22 {
                            i += 3
                            break
                        } else {
                            i += 1
                        }
                    }
                } else {
                    i += 1
                    while true {
                        guard i < bytes.count, bytes[i] != 0x0A, bytes[i] != 0x0D else { return nil }
                        if bytes[i] == 0x5C {
                            i += 2
                        } else if bytes[i] == 0x22 {
                            i += 1
                            break
                        } else {
                            i += 1
                        }
                    }
                }
                tokens.append(Token(kind: .string, text: "", start: start, end: min(i, bytes.count)))
                continue
            default:
                break
            }
            if isNameStart(b) {
                while i < bytes.count, isNameStart(bytes[i]) || isDigit(bytes[i]) { i += 1 }
                tokens.append(
                    Token(kind: .name, text: String(decoding: bytes[start..<i], as: UTF8.self), start: start, end: i))
            } else if isDigit(b) || b == 0x2D {
                i += 1
                while i < bytes.count, isDigit(bytes[i]) || [0x2E, 0x65, 0x45, 0x2B, 0x2D].contains(bytes[i]) {
                    i += 1
                }
                tokens.append(Token(kind: .number, text: "", start: start, end: i))
            } else {
                return nil
            }
        }
        return tokens
    }
}

/// Reads `mutation [Name] ($input: Type) { [alias:] resolveIdentifier(input: $input) [{ selection }] }` followed
/// only by fragment definitions.
private struct TemplateParser {
    let source: [UInt8]
    let tokens: [GraphQLLexer.Token]
    var position = 0

    init(source: [UInt8], tokens: [GraphQLLexer.Token]) {
        self.source = source
        self.tokens = tokens
    }

    private var current: GraphQLLexer.Token? { position < tokens.count ? tokens[position] : nil }

    private mutating func take(_ text: String) -> Bool {
        guard let token = current, token.kind != .string, token.text == text else { return false }
        position += 1
        return true
    }

    private mutating func name() -> String? {
        guard let token = current, token.kind == .name else { return nil }
        position += 1
        return token.text
    }

    private func text(_ from: Int, _ to: Int) -> String { String(decoding: source[from..<to], as: UTF8.self) }

    mutating func parse() -> (inputType: String, selection: String, trailer: String)? {
        guard take("mutation") else { return nil }
        if current?.kind == .name { position += 1 }
        guard take("("), take("$"), let variable = name(), take(":") else { return nil }
        // The variable's type: names, `!`, `[` and `]` only (no default value, no directives).
        guard let typeStart = current?.start else { return nil }
        var typeEnd = typeStart
        while let token = current, token.kind == .name || ["!", "[", "]"].contains(token.text) {
            typeEnd = token.end
            position += 1
        }
        guard typeEnd > typeStart, take(")"), take("{") else { return nil }
        // An alias the document gave its field is dropped: the batch names each field itself.
        if position + 1 < tokens.count, tokens[position].kind == .name, tokens[position + 1].text == ":" {
            position += 2
        }
        guard take("resolveIdentifier"), take("("), take("input"), take(":"), take("$"), name() == variable,
            take(")")
        else { return nil }
        var selection = ""
        if let open = current, open.kind == .punctuator, open.text == "{" {
            var depth = 0
            var end = open.end
            while let token = current {
                position += 1
                if token.kind == .punctuator, token.text == "{" { depth += 1 }
                if token.kind == .punctuator, token.text == "}" { depth -= 1 }
                end = token.end
                if depth == 0 { break }
            }
            guard depth == 0 else { return nil }
            selection = text(open.start, end)
        }
        guard take("}") else { return nil }
        // Only fragment definitions may follow (the selection may spread them):
        // `fragment Name on Type [directives] { ... }`, any number of times.
        var trailer = ""
        if let first = current {
            while current != nil {
                guard take("fragment"), name() != nil, take("on"), name() != nil else { return nil }
                while let token = current, !(token.kind == .punctuator && token.text == "{") {
                    if token.kind == .punctuator, token.text == "}" { return nil }
                    position += 1
                }
                var depth = 0
                while let token = current {
                    position += 1
                    if token.kind == .punctuator, token.text == "{" { depth += 1 }
                    if token.kind == .punctuator, token.text == "}" { depth -= 1 }
                    if depth == 0 { break }
                }
                guard depth == 0 else { return nil }
            }
            trailer = text(first.start, source.count).trimmingASCIIWhitespace()
        }
        return (text(typeStart, typeEnd), selection, trailer)
    }
}
