import BridgeCore
import CCryptoShim
import Foundation
import HTTPTransport
import Logging
import SinkKit
import Spool

extension ScanSinkModule {
    /// A webhook (`webhook` section): every read POSTed from the spool's `webhook` queue, in
    /// capture order per identifier, at least once (docs/contracts.md, "Webhook request").
    public static let webhook = ScanSinkModule(
        name: "webhook", statusKey: "webhook", configSection: WebhookConfig.self,
        make: { SinkSlot<QueuedSink<WebhookSettings>, WebhookSettings>(.queued(.webhook), context: $0) },
        doctor: { [WebhookTransport.doctor($0)] },
        queue: { $0.webhook.url == nil ? nil : QueuedSinkKind.webhook.name })
}

extension QueuedSinkKind<WebhookSettings> {
    static let webhook = QueuedSinkKind(
        name: "webhook",
        settings: { configuration throws(ConfigError) in try WebhookConfig.settings(configuration.config) },
        describe: { [("url", $0.url)] }, secrets: { [$0.token, $0.secret].compactMap { $0 } },
        transport: { current, logger in WebhookTransport(current: current, logger: logger) })
}

/// The webhook's side of the runner: its batch size and lease, a connection per worker, and what a request holds and
/// an answer means, under the settings of the moment (a reload reaches the next request).
struct WebhookTransport: QueuedSinkTransport {
    let current: @Sendable () -> WebhookSettings
    let logger: Logger

    var batchSize: Int { current().batchSize }
    var lease: Double { current().timeout + 5 }

    func connect() -> (any QueuedSinkConnection)? {
        guard let client = HTTPClient() else {
            logger.error("webhook: cannot create an HTTP client (libcurl)")
            return nil
        }
        return WebhookConnection(current: current, client: client)
    }

    /// The body (one read's object when `batchSize` is 1, else a JSON array; the read without its delivery state,
    /// so every try of a request carries the same bytes) and its headers: the key a receiver
    /// de-duplicates by (the scan's id, or for several the SHA-256 of their ids, so a repeat of the same scans
    /// has the same key), the bearer token and the body's signature when configured.
    static func request(_ records: [ScanRecord], settings: WebhookSettings) -> (body: [UInt8], headers: [String]) {
        let json: JSONValue =
            settings.batchSize == 1 ? records[0].readJSON() : .array(records.map { $0.readJSON() })
        let body = Array(json.encoded().utf8)
        let key =
            records.count == 1 ? records[0].id : hex(sha256(Array(records.map(\.id).joined(separator: "\n").utf8)))
        var headers = [
            "Content-Type: application/json", "User-Agent: \(BridgeVersion.userAgent)", "Idempotency-Key: \(key)",
        ]
        if let token = settings.token { headers.append("Authorization: Bearer \(token)") }
        if let secret = settings.secret {
            headers.append("X-Plings-Signature-256: sha256=" + hex(hmacSHA256(key: Array(secret.utf8), body)))
        }
        return (body, headers)
    }

    /// 2xx taken; a redirect (never followed: the token would go elsewhere), 401 and 403 pause; 400, 404, 410,
    /// 413 and 422 refuse the scan for good; anything else (408, 429, 5xx) is retried, after `Retry-After` if given.
    static func classify(_ response: HTTPResponse) -> DeliveryOutcome {
        let status = response.status
        let retryAfter = response.retryAfter.flatMap(DeliveryClassifier.parseRetryAfter)
        switch status {
        case 200..<300: return .delivered(response: "")
        case 300..<400:
            let target = response.location.map { " to " + String($0.prefix(300)) } ?? " without a Location"
            return .redirected(reason: "HTTP \(status): webhook.url redirects\(target)")
        case 401, 403: return .authPaused(reason: "HTTP \(status): the receiver refused the request's credentials")
        case 400, 404, 410, 413, 422: return .dead(reason: "HTTP \(status)" + excerpt(response.body), response: "")
        default: return .retry(reason: "HTTP \(status)" + excerpt(response.body), retryAfter: retryAfter)
        }
    }

    /// The start of a receiver's answer, for the reason: one line, at most 200 characters.
    static func excerpt(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(400), as: UTF8.self)
            .map { $0.isNewline || $0 == "\t" ? " " : $0 }.filter { !($0.asciiValue.map { $0 < 0x20 } ?? false) }
        let line = String(String(text).trimmingASCIIWhitespace().prefix(200))
        return line.isEmpty ? "" : ": " + line
    }

    /// `doctor`: the section resolves (URL, files readable). The receiver is not probed: a probe would deliver.
    static func doctor(_ context: SinkDoctorContext) -> DoctorCheck {
        do {
            guard let settings = try WebhookConfig.settings(context.configuration.config) else {
                return DoctorCheck("webhook", .skip, "no webhook.url: scans are not POSTed to a webhook")
            }
            return DoctorCheck(
                "webhook", .ok,
                "scans go to \(settings.url)" + (settings.secret == nil ? "" : ", signed")
                    + " (the receiver is not probed: a probe would deliver)")
        } catch {
            let webhook = context.configuration.config.webhook
            if let skip = context.unreadableCredential(
                [webhook.tokenFile, webhook.secretFile], check: "webhook",
                subject: "webhook.url is \(webhook.url ?? "")", what: "its token and secret")
            {
                return skip
            }
            return DoctorCheck(
                "webhook", .fail, error.description, fix: "correct the webhook section (docs/configuration.md)")
        }
    }
}

/// HMAC-SHA256 (RFC 2104) of `data` under `key`, by libcrypto.
func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    _ = plings_hmac_sha256(key, key.count, data, data.count, &out)
    return out
}

func sha256(_ data: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    _ = plings_sha256(data, data.count, &out)
    return out
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// One worker's keep-alive client: one request per batch, one at a time.
struct WebhookConnection: QueuedSinkConnection {
    let current: @Sendable () -> WebhookSettings
    let client: HTTPClient

    func cancel() { client.cancel() }

    func deliver(_ batch: DeliveryBatch) -> QueuedAnswer? {
        let settings = current()
        let request = WebhookTransport.request(batch.records, settings: settings)
        do {
            let response = try client.post(
                url: settings.url, headers: request.headers, body: request.body, timeout: settings.timeout,
                allowHTTP: settings.allowHTTP)
            return .whole(WebhookTransport.classify(response))
        } catch {
            return error.cancelled ? nil : .whole(.retry(reason: error.description, retryAfter: nil))
        }
    }
}
