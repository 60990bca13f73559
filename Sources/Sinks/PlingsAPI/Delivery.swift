import BridgeCore
import Foundation
import HTTPTransport
import Spool

/// Where and how to deliver: the API settings resolved from the configuration, with the token.
public struct APISettings: Sendable, Equatable {
    public var url: String
    /// The bearer token. Never logged, never in an error message, never on argv.
    public var token: String
    public let document: String
    public var timeout: Double
    public var concurrency: Int
    /// The most scans one request carries; 1 sends each alone.
    public var batchSize: Int
    /// How `document` is repeated for several scans, or nil when it cannot be (then each scan goes alone).
    public let batchTemplate: GraphQLBatchTemplate?
    public var allowInsecureHTTP: Bool
    public var userAgent: String

    public init(
        url: String, token: String, document: String, timeout: Double, concurrency: Int, batchSize: Int = 1,
        allowInsecureHTTP: Bool, userAgent: String
    ) {
        self.batchSize = max(1, batchSize)
        self.batchTemplate = GraphQLBatchTemplate(document: document)
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

    /// The request headers (docs/contracts.md, "HTTP request"). `key` is the scan's id, or a batch's key.
    public static func headers(settings: APISettings, key: String) -> [String] {
        [
            "Content-Type: application/json",
            "Accept: application/json",
            "Authorization: Bearer \(settings.token)",
            "Idempotency-Key: \(key)",
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
        return post(body, key: record.id, failed: { $0 }) { response in
            // The token must never reach the spool, even when the API echoes it back in an error.
            DeliveryClassifier.classify(
                status: response.status, retryAfterHeader: response.retryAfter, body: response.body,
                location: response.location, secrets: [settings.token])
        }
    }

    /// Sends a batch of two or more scans once (docs/contracts.md, "Batched request"). A cancelled request is
    /// reported as nil (shutdown: the scans are released untouched).
    public func attempt(_ batch: DeliveryBatch, template: GraphQLBatchTemplate) -> BatchAnswer? {
        let body = template.body(inputsJSON: batch.records.map { $0.inputJSON ?? "null" })
        return post(body, key: batch.key, failed: { .whole($0) }) { response in
            DeliveryClassifier.classifyBatch(
                status: response.status, retryAfterHeader: response.retryAfter, body: response.body,
                location: response.location, secrets: [settings.token], count: batch.records.count)
        }
    }

    /// POSTs `body` under the idempotency key `key` and classifies the answer; a transport failure becomes a
    /// `.retry` with the token redacted from its message (`failed` wraps it); nil when the request was cancelled.
    private func post<Answer>(
        _ body: String, key: String, failed: (DeliveryOutcome) -> Answer, classify: (HTTPResponse) -> Answer
    ) -> Answer? {
        do {
            let response = try client.post(
                url: settings.url, headers: Delivery.headers(settings: settings, key: key), body: Array(body.utf8),
                timeout: settings.timeout, allowHTTP: settings.allowInsecureHTTP)
            return classify(response)
        } catch {
            if error.cancelled { return nil }
            return failed(DeliveryOutcome.retry(reason: error.message, retryAfter: nil).redacting([settings.token]))
        }
    }
}
