/// What one delivery attempt's answer means for the scan (docs/contracts.md, "Outcomes").
public enum DeliveryOutcome: Sendable, Equatable {
    /// 2xx with `data.resolveIdentifier` and no errors. `response` is the (truncated) body to keep.
    case delivered(response: String)
    /// A permanent refusal: validation error, 400, 404, 413, 422. The scan is dead-lettered with the reason.
    case dead(reason: String, response: String)
    /// 401, 403 or an auth error code: the scan stays pending and delivery pauses until reload or long backoff.
    case authPaused(reason: String)
    /// A 3xx: the configured URL is wrong (redirects are never followed: the token would go elsewhere). The
    /// scan stays pending and delivery pauses as for a refused token, with the redirect and its `Location`.
    case redirected(reason: String)
    /// Anything transient: retry with backoff, honouring `retryAfter` (seconds) when the server gave one.
    case retry(reason: String, retryAfter: Double?)

    public var reason: String? {
        switch self {
        case .delivered: return nil
        case .dead(let reason, _), .authPaused(let reason), .redirected(let reason), .retry(let reason, _):
            return reason
        }
    }

    /// The outcome with every spelling of each secret (`LogLine.spellings`) removed from its texts.
    public func redacting(_ secrets: [String]) -> DeliveryOutcome {
        func clean(_ text: String) -> String { LogLine.redact(text, secrets: secrets) }
        switch self {
        case .delivered(let response): return .delivered(response: clean(response))
        case .dead(let reason, let response): return .dead(reason: clean(reason), response: clean(response))
        case .authPaused(let reason): return .authPaused(reason: clean(reason))
        case .redirected(let reason): return .redirected(reason: clean(reason))
        case .retry(let reason, let retryAfter): return .retry(reason: clean(reason), retryAfter: retryAfter)
        }
    }
}

/// Classifies an HTTP answer from the API. Pure: the forwarder does the I/O, this decides.
public enum DeliveryClassifier {
    /// How much of a response body is kept in the spool.
    public static let keptResponseBytes = 2048

    /// GraphQL error codes that mean the input itself is bad: retrying the same input cannot succeed.
    static let validationCodes: Set<String> = [
        "BAD_USER_INPUT", "GRAPHQL_VALIDATION_FAILED", "GRAPHQL_PARSE_FAILED", "OPERATION_RESOLUTION_FAILURE",
        "VALIDATION_ERROR", "BAD_REQUEST",
        "INVALID_INPUT", "NOT_FOUND",
    ]
    /// GraphQL error codes that mean our credentials are refused.
    static let authCodes: Set<String> = ["UNAUTHENTICATED", "UNAUTHORIZED", "FORBIDDEN", "INVALID_TOKEN"]

    /// - Parameters:
    ///   - status: the HTTP status code.
    ///   - retryAfterHeader: the raw `Retry-After` header value, if any.
    ///   - body: the response body bytes.
    ///   - location: the raw `Location` header value, if any (named in a redirect's reason).
    ///   - secrets: texts that must not survive into the outcome (the token, which an API may echo back in an
    ///     error): removed from the whole body before it is truncated (so no part of one is kept at the cut),
    ///     and from the reasons built from it.
    public static func classify(
        status: Int, retryAfterHeader: String?, body: [UInt8], location: String? = nil, secrets: [String] = []
    ) -> DeliveryOutcome {
        classify(
            status: status, retryAfterHeader: retryAfterHeader, cleanBody: cleaned(body, secrets: secrets),
            location: location, secrets: secrets)
    }

    /// `classify` of a body already `cleaned` of `secrets` (`classifyBatch` cleans a batch's body once for the
    /// whole answer and its fields). The outcome is still redacted: a redirect's reason names the raw `Location`.
    static func classify(
        status: Int, retryAfterHeader: String?, cleanBody: [UInt8], location: String?, secrets: [String]
    ) -> DeliveryOutcome {
        let outcome = classifyClean(
            status: status, retryAfterHeader: retryAfterHeader, body: cleanBody, location: location)
        return secrets.isEmpty ? outcome : outcome.redacting(secrets)
    }

    /// `body` without any spelling of `secrets`: redacted as text, then, where JSON escapes could hide one,
    /// decoded and redacted again (`unescapedIfHiding`).
    static func cleaned(_ body: [UInt8], secrets: [String]) -> [UInt8] {
        guard !secrets.isEmpty else { return body }
        return unescapedIfHiding(
            Array(LogLine.redact(String(decoding: body, as: UTF8.self), secrets: secrets).utf8), secrets: secrets)
    }

    /// A JSON body may spell a secret with any character as a `\uXXXX` escape, which text redaction cannot see
    /// and anyone decoding the kept response would. When the body has such escapes and its decoded values hold a
    /// secret, the body is parsed, re-encoded (same values, escapes decoded) and redacted; else left as it is.
    static func unescapedIfHiding(_ body: [UInt8], secrets: [String]) -> [UInt8] {
        let hasEscape = zip(body, body.dropFirst()).contains { $0 == 0x5C && $1 == 0x75 }  // "\u"
        guard hasEscape, let json = try? JSONParser.parse(body) else { return body }
        let decoded = json.encoded()
        let redacted = LogLine.redact(decoded, secrets: secrets)
        return redacted == decoded ? body : Array(redacted.utf8)
    }

    private static func classifyClean(status: Int, retryAfterHeader: String?, body: [UInt8], location: String?)
        -> DeliveryOutcome
    {
        let kept = truncated(body)
        let retryAfter = retryAfterHeader.flatMap(parseRetryAfter)
        switch status {
        case 200..<300:
            break
        case 401, 403:
            return .authPaused(reason: "HTTP \(status): the API refused the token")
        case 400, 404, 413, 422:
            return .dead(reason: "HTTP \(status)" + summary(of: body), response: kept)
        case 408, 429, 500..<600:
            return .retry(reason: "HTTP \(status)" + summary(of: body), retryAfter: retryAfter)
        case 300..<400:
            let target = location.map { " to " + String($0.prefix(300)) } ?? " without a Location"
            return .redirected(reason: "HTTP \(status): api.url redirects\(target)")
        default:
            // Other odd statuses: not a refusal of this scan, so keep it and try again later.
            return .retry(reason: "unexpected HTTP \(status)", retryAfter: retryAfter)
        }
        guard let json = try? JSONParser.parse(body) else {
            return .retry(reason: "HTTP \(status) with a body that is not JSON", retryAfter: retryAfter)
        }
        if case .array(let errors)? = json["errors"], !errors.isEmpty {
            let codes = errors.compactMap { $0["extensions"]?["code"]?.stringValue?.uppercased() }
            let message = errors.first?["message"]?.stringValue ?? "GraphQL error"
            let detail = "GraphQL error: " + String(message.prefix(200)) + (codes.isEmpty ? "" : " (\(codes[0]))")
            if codes.contains(where: authCodes.contains) { return .authPaused(reason: detail) }
            if codes.contains(where: validationCodes.contains) { return .dead(reason: detail, response: kept) }
            return .retry(reason: detail, retryAfter: retryAfter)
        }
        guard let data = json["data"], let result = data["resolveIdentifier"], !result.isNull else {
            return .retry(reason: "HTTP \(status) without data.resolveIdentifier", retryAfter: retryAfter)
        }
        return .delivered(response: kept)
    }

    /// `Retry-After` as delta-seconds (HTTP dates are rare from APIs and ignored: backoff applies instead).
    public static func parseRetryAfter(_ value: String) -> Double? {
        let trimmed = value.trimmingASCIIWhitespace()
        guard !trimmed.isEmpty, trimmed.utf8.count <= 9, trimmed.utf8.allSatisfy({ (48...57).contains($0) }),
            let seconds = Int(trimmed)
        else { return nil }
        return Double(seconds)
    }

    static func truncated(_ body: [UInt8]) -> String {
        if body.count <= keptResponseBytes { return String(decoding: body, as: UTF8.self) }
        return String(decoding: body.prefix(keptResponseBytes), as: UTF8.self) + "…"
    }

    private static func summary(of body: [UInt8]) -> String {
        guard let json = try? JSONParser.parse(body), case .array(let errors)? = json["errors"],
            let message = errors.first?["message"]?.stringValue
        else { return "" }
        return ": " + String(message.prefix(200))
    }
}

/// Exponential backoff with full jitter: the n-th retry waits uniformly in [0, min(cap, base * 2^n)].
public struct Backoff: Sendable {
    public var base: Double
    public var cap: Double

    public init(base: Double = 1, cap: Double = 300) {
        self.base = base
        self.cap = cap
    }

    /// The ceiling of the wait before retry number `attempt` (0-based).
    public func ceiling(attempt: Int) -> Double {
        let exponent = min(max(attempt, 0), 30)
        return min(cap, base * Double(1 << exponent))
    }

    /// The longest `Retry-After` we honour: a server asking for more is waited on for an hour, then asked again.
    public static let maximumRetryAfter: Double = 3600

    /// The wait before retry number `attempt`. A server's `Retry-After` is a floor: we never come back sooner
    /// than asked (up to `maximumRetryAfter`), even when the jittered backoff is shorter.
    public func delay(attempt: Int, retryAfter: Double? = nil, random: Double) -> Double {
        let jittered = ceiling(attempt: attempt) * min(max(random, 0), 1)
        guard let retryAfter, retryAfter.isFinite, retryAfter > 0 else { return jittered }
        return max(jittered, min(retryAfter, Backoff.maximumRetryAfter))
    }
}
