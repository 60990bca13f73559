import BridgeCore
import Foundation

/// Where and how to deliver: the API settings resolved from the configuration, with the token.
public struct APISettings: Sendable {
    public var url: String
    /// The bearer token. Never logged, never in an error message, never on argv.
    public var token: String
    public var document: String
    public var timeout: Double
    public var concurrency: Int
    public var allowInsecureHTTP: Bool
    public var userAgent: String

    public init(
        url: String, token: String, document: String, timeout: Double, concurrency: Int, allowInsecureHTTP: Bool,
        userAgent: String
    ) {
        self.url = url
        self.token = token
        self.document = document
        self.timeout = timeout
        self.concurrency = concurrency
        self.allowInsecureHTTP = allowInsecureHTTP
        self.userAgent = userAgent
    }
}

/// One delivery attempt of one scan: build the request (docs/contracts.md, "HTTP request"), send it, classify it.
public struct Delivery {
    public let settings: APISettings
    public let client: HTTPClient

    public init(settings: APISettings, client: HTTPClient) {
        self.settings = settings
        self.client = client
    }

    /// The request headers (docs/contracts.md, "HTTP request").
    public static func headers(settings: APISettings, scanID: String) -> [String] {
        [
            "Content-Type: application/json",
            "Accept: application/json",
            "Authorization: Bearer \(settings.token)",
            "Idempotency-Key: \(scanID)",
            "User-Agent: \(settings.userAgent)",
        ]
    }

    /// Sends `record` once. A transport failure is a `.retry` (the caller backs off); a cancelled request is
    /// reported as nil (shutdown: the scan is released untouched).
    public func attempt(_ record: ScanRecord) -> DeliveryOutcome? {
        guard let input = record.inputJSON else {
            return .dead(reason: "no input to send (unrecognized read)", response: "")
        }
        let body = GraphQLRequestBody.build(document: settings.document, inputJSON: input)
        do {
            let response = try client.post(
                url: settings.url, headers: Delivery.headers(settings: settings, scanID: record.id),
                body: Array(body.utf8), timeout: settings.timeout, allowHTTP: settings.allowInsecureHTTP)
            // The token must never reach the spool, even when the API echoes it back in an error.
            return DeliveryClassifier.classify(
                status: response.status, retryAfterHeader: response.retryAfter, body: response.body,
                location: response.location, secrets: [settings.token])
        } catch {
            if error.cancelled { return nil }
            return DeliveryOutcome.retry(reason: error.message, retryAfter: nil).redacting([settings.token])
        }
    }
}
