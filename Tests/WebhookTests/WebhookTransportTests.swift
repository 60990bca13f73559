import BridgeCore
import Foundation
import HTTPTransport
import Testing

@testable import Webhook

/// The webhook's request and the meaning of a receiver's answer. Signature values come from RFC 4231 (HMAC-SHA256
/// test cases) and FIPS 180-2 (SHA-256 of "abc"); the statuses from docs/contracts.md, "Webhook request".
struct WebhookTransportTests {
    @Test func hmacMatchesRFC4231() {
        #expect(
            hex(hmacSHA256(key: [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(
            hex(hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a key longer than SHA-256's block is hashed first.
        #expect(
            hex(
                hmacSHA256(
                    key: [UInt8](repeating: 0xaa, count: 131),
                    Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        #expect(hex(sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    func record(_ id: String) -> ScanRecord {
        ScanRecord(
            id: id, createdAt: Date(timeIntervalSince1970: 1_800_000_000), state: .pending, sourceKind: .manual,
            device: "bench", uid: nil, raw: "https://s.plings.io/?t=q&i=Wh&p=1", inputJSON: nil, identifier: nil,
            attempts: 0, lastError: nil, nextAttemptAt: nil, deliveredAt: nil, response: nil)
    }

    func settings(batchSize: Int = 1, token: String? = nil, secret: String? = nil) -> WebhookSettings {
        WebhookSettings(
            url: "https://hooks.example/scan", token: token, secret: secret, timeout: 5, batchSize: batchSize,
            allowHTTP: false)
    }

    func header(_ headers: [String], _ name: String) -> String? {
        headers.first { $0.lowercased().hasPrefix(name.lowercased() + ": ") }.map {
            String($0.dropFirst(name.count + 2))
        }
    }

    /// One scan alone: the read's object (docs/contracts.md, "Webhook request": the record's fields up to `input`
    /// and `createdAt`, no delivery state), keyed by its id; no credentials unless configured.
    @Test func aLoneScanIsItsObjectUnderItsOwnKey() throws {
        let (body, headers) = WebhookTransport.request([record("a1")], settings: settings())
        let json = try JSONParser.parse(body)
        #expect(json["id"]?.stringValue == "a1")
        guard case .object(let fields) = json else {
            Issue.record("not an object")
            return
        }
        #expect(fields.map(\.0) == ["id", "source", "raw", "symbology", "genuine", "input", "createdAt", "clock"])
        #expect(json["createdAt"]?.stringValue == "2027-01-15T08:00:00.000Z")
        #expect(header(headers, "Idempotency-Key") == "a1")
        #expect(header(headers, "Content-Type") == "application/json")
        #expect(header(headers, "Authorization") == nil)
        #expect(header(headers, "X-Plings-Signature-256") == nil)
    }

    /// A retry is the same request: the delivery state a try leaves on the scan (attempts, the last error, the
    /// backoff) changes neither the body nor its signature.
    @Test func aRetryCarriesTheSameBytesAndSignature() {
        let secret = "It's a Secret to Everybody"
        var retried = record("a1")
        retried.attempts = 1
        retried.lastError = "HTTP 500"
        retried.nextAttemptAt = Date(timeIntervalSince1970: 1_800_000_060)
        for size in [1, 5] {
            let first = WebhookTransport.request([record("a1")], settings: settings(batchSize: size, secret: secret))
            let again = WebhookTransport.request([retried], settings: settings(batchSize: size, secret: secret))
            #expect(first.body == again.body)
            #expect(first.headers == again.headers)
        }
    }

    /// Several: an array in capture order, keyed by the SHA-256 of their ids (one per line); the token as a bearer
    /// credential and the body's HMAC-SHA256 under the secret, as `sha256=<hex>`.
    @Test func aBatchIsAnArrayUnderTheKeyOfItsIds() throws {
        let token = "tok-0123456789abcdef"
        let secret = "It's a Secret to Everybody"
        let (body, headers) = WebhookTransport.request(
            [record("a1"), record("b2")], settings: settings(batchSize: 5, token: token, secret: secret))
        guard case .array(let items) = try JSONParser.parse(body) else {
            Issue.record("not an array")
            return
        }
        #expect(items.map { $0["id"]?.stringValue } == ["a1", "b2"])
        #expect(header(headers, "Idempotency-Key") == hex(sha256(Array("a1\nb2".utf8))))
        #expect(header(headers, "Authorization") == "Bearer \(token)")
        #expect(
            header(headers, "X-Plings-Signature-256") == "sha256=" + hex(hmacSHA256(key: Array(secret.utf8), body)))
        // With batches configured, even one scan goes as an array: a receiver parses one shape.
        let (single, _) = WebhookTransport.request([record("a1")], settings: settings(batchSize: 5))
        if case .array = try JSONParser.parse(single) {} else { Issue.record("a batch of one is not an array") }
    }

    @Test(arguments: [
        (200, "delivered"), (204, "delivered"), (301, "paused"), (307, "paused"), (401, "paused"), (403, "paused"),
        (400, "dead"), (404, "dead"), (410, "dead"), (413, "dead"), (422, "dead"), (408, "retry"), (429, "retry"),
        (500, "retry"), (503, "retry"), (418, "retry"),
    ])
    func statusesMeanWhatTheContractSays(status: Int, meaning: String) {
        let outcome = WebhookTransport.classify(
            HTTPResponse(status: status, retryAfter: "7", location: nil, body: Array("line one\nline two".utf8)))
        switch (outcome, meaning) {
        case (.delivered, "delivered"), (.authPaused, "paused"), (.redirected, "paused"): break
        case (.dead(let reason, _), "dead"): #expect(reason == "HTTP \(status): line one line two")
        case (.retry(_, let retryAfter), "retry"): #expect(retryAfter == 7)
        default: Issue.record("HTTP \(status) gave \(outcome), not \(meaning)")
        }
    }

    @Test func theURLMustBeSafe() throws {
        func check(_ url: String, insecure: Bool = false) -> String? {
            var config = BridgeConfig()
            config.webhook.url = url
            config.webhook.allowInsecureHTTP = insecure
            do {
                try WebhookConfig.validate(config)
                return nil
            } catch { return error.message }
        }
        #expect(check("https://hooks.example/scan") == nil)
        #expect(check("http://127.0.0.1:8080/hook") == nil)
        #expect(check("http://10.0.0.5/hook")?.contains("webhook.allowInsecureHTTP") == true)
        #expect(check("http://10.0.0.5/hook", insecure: true) == nil)
        #expect(check("https://user:pw@hooks.example/")?.contains("credentials") == true)
        #expect(check("ftp://hooks.example/")?.contains("not http or https") == true)
    }
}
