import Testing

@testable import BridgeCore

struct DeliveryClassifierTests {
    func classify(_ status: Int, _ body: String, retryAfter: String? = nil) -> DeliveryOutcome {
        DeliveryClassifier.classify(status: status, retryAfterHeader: retryAfter, body: Array(body.utf8))
    }

    @Test func outcomeTable() {
        let ok = #"{"data":{"resolveIdentifier":{"__typename":"R"}}}"#
        #expect(classify(200, ok) == .delivered(response: ok))
        #expect(
            classify(
                200,
                #"{"data":{"resolveIdentifier":null},"errors":[{"message":"bad","extensions":{"code":"BAD_USER_INPUT"}}]}"#
            ).isDead)
        #expect(
            classify(200, #"{"errors":[{"message":"x","extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}"#).isDead)
        #expect(
            classify(200, #"{"errors":[{"message":"who","extensions":{"code":"UNAUTHENTICATED"}}]}"#)
                == .authPaused(reason: "GraphQL error: who (UNAUTHENTICATED)"))
        #expect(
            classify(200, #"{"errors":[{"message":"boom","extensions":{"code":"INTERNAL_SERVER_ERROR"}}]}"#)
                == .retry(reason: "GraphQL error: boom (INTERNAL_SERVER_ERROR)", retryAfter: nil))
        #expect(classify(200, "<html>") == .retry(reason: "HTTP 200 with a body that is not JSON", retryAfter: nil))
        #expect(
            classify(200, #"{"data":{}}"#) == .retry(reason: "HTTP 200 without data.resolveIdentifier", retryAfter: nil)
        )
        for status in [400, 404, 413, 422] { #expect(classify(status, "").isDead) }
        for status in [401, 403] {
            #expect(classify(status, "") == .authPaused(reason: "HTTP \(status): the API refused the token"))
        }
        for status in [408, 429, 500, 502, 503, 504] { #expect(classify(status, "").isRetry) }
        #expect(classify(429, "", retryAfter: " 30 ") == .retry(reason: "HTTP 429", retryAfter: 30))
        #expect(
            classify(503, "", retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT")
                == .retry(reason: "HTTP 503", retryAfter: nil))
        // A redirect means a wrong api.url: redirects are never followed (the token would go elsewhere), and
        // retrying cannot help, so delivery pauses and says where the redirect points (hardening finding 11).
        #expect(
            DeliveryClassifier.classify(
                status: 301, retryAfterHeader: nil, body: [], location: "https://api.example/graphql")
                == .redirected(reason: "HTTP 301: api.url redirects to https://api.example/graphql"))
        #expect(classify(302, "") == .redirected(reason: "HTTP 302: api.url redirects without a Location"))
    }

    @Test func responseIsTruncated() {
        let big = #"{"data":{"resolveIdentifier":{"x":""# + String(repeating: "a", count: 10_000) + #""}}}"#
        guard case .delivered(let kept) = classify(200, big) else {
            Issue.record("not delivered")
            return
        }
        #expect(kept.utf8.count <= DeliveryClassifier.keptResponseBytes + 3)
    }

    @Test func backoffIsExponentialCappedWithFullJitter() {
        let b = Backoff(base: 1, cap: 300)
        #expect(b.ceiling(attempt: 0) == 1)
        #expect(b.ceiling(attempt: 3) == 8)
        #expect(b.ceiling(attempt: 20) == 300)
        #expect(b.ceiling(attempt: 1000) == 300)
        #expect(b.delay(attempt: 3, random: 0.5) == 4)
        #expect(b.delay(attempt: 3, random: 0) == 0)
        #expect(b.delay(attempt: 0, retryAfter: 30, random: 0.1) == 30)
        #expect(b.delay(attempt: 0, retryAfter: 1e9, random: 0.1) == 3600)
    }
}

extension DeliveryOutcome {
    var isDead: Bool { if case .dead = self { return true } else { return false } }
    var isRetry: Bool { if case .retry = self { return true } else { return false } }
}
