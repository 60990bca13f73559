import BridgeCore
import Testing

/// The batched request of docs/contracts.md, "Batched request", and how its answer is read. The answers are
/// shaped as the GraphQL specification's "Response" section says a server answers: `data` keyed by each field's
/// alias, a field that raised an error `null` in `data` with an entry in `errors` whose `path` starts with that
/// alias, and a request that failed before execution (a document or variables refused) with `errors` and no `data`.
struct GraphQLBatchTests {
    let template = GraphQLBatchTemplate(document: GraphQLRequestBody.defaultDocument)

    @Test func theDefaultDocumentRepeatsItsFieldUnderAliases() throws {
        let template = try #require(template)
        #expect(template.inputType == "ResolveIdentifierInput!")
        #expect(template.selection == "{ __typename }")
        #expect(
            template.document(count: 2)
                == "mutation ResolveIdentifiers($i0: ResolveIdentifierInput!, $i1: ResolveIdentifierInput!) {"
                + " s0: resolveIdentifier(input: $i0) { __typename } s1: resolveIdentifier(input: $i1) { __typename } }"
        )
        let body = template.body(inputsJSON: [#"{"identifier":"A"}"#, #"{"identifier":"B"}"#])
        let json = try JSONParser.parse(body)
        #expect(json["operationName"] == .string("ResolveIdentifiers"))
        #expect(json["variables"]?["i0"]?["identifier"] == .string("A"))
        #expect(json["variables"]?["i1"]?["identifier"] == .string("B"))
        #expect(json["query"]?.stringValue == template.document(count: 2))
    }

    @Test func aCustomDocumentKeepsItsSelectionAndFragments() throws {
        let document = """
            # the owner's view
            mutation Seen($input: ResolveIdentifierInput!) {
              seen: resolveIdentifier(input: $input) { ok ...Who @include(if: true) }
            }
            fragment Who on ResolveIdentifierResult { identifier }
            """
        let template = try #require(GraphQLBatchTemplate(document: document))
        #expect(template.selection == "{ ok ...Who @include(if: true) }")
        #expect(template.trailer == "fragment Who on ResolveIdentifierResult { identifier }")
        #expect(template.document(count: 1).hasSuffix("} fragment Who on ResolveIdentifierResult { identifier }"))
        // Strings and comments may hold braces without confusing the reading.
        let quoted = #"mutation M($input: [In!]!) { resolveIdentifier(input: $input) { a(note: "}{ \" #") } }"#
        #expect(GraphQLBatchTemplate(document: quoted)?.selection == #"{ a(note: "}{ \" #") }"#)
        #expect(GraphQLBatchTemplate(document: quoted)?.inputType == "[In!]!")
    }

    @Test(arguments: [
        "query Q($input: ResolveIdentifierInput!) { resolveIdentifier(input: $input) { ok } }",
        "mutation M($input: ResolveIdentifierInput!) { resolveIdentifier(input: $input) { ok } other { ok } }",
        "mutation M($input: ResolveIdentifierInput!, $x: Int) { resolveIdentifier(input: $input) { ok } }",
        "mutation M($input: ResolveIdentifierInput! = null) { resolveIdentifier(input: $input) { ok } }",
        "mutation M($input: ResolveIdentifierInput!) { resolveIdentifier(input: $other) { ok } }",
        "mutation M($input: ResolveIdentifierInput!) { resolveIdentifier(input: $input) { ok } } query Q { a }",
        "mutation M($input: ResolveIdentifierInput!) { resolveIdentifier(input: $input) { ok }",
        "mutation M($input: ResolveIdentifierInput!) { resolveIdentifier(input: \"$input) { ok } }",
    ])
    func documentsThatAreNotOneResolveIdentifierAreSentAlone(document: String) {
        #expect(GraphQLBatchTemplate(document: document) == nil)
    }

    private func classify(_ status: Int, _ body: String, count: Int = 2) -> BatchAnswer {
        DeliveryClassifier.classifyBatch(status: status, retryAfterHeader: nil, body: Array(body.utf8), count: count)
    }

    @Test func eachFieldIsAnsweredAsASingleRequestWouldBe() throws {
        let answer = classify(
            200,
            #"{"errors":[{"message":"bad timestamp","path":["s1"],"extensions":{"code":"BAD_USER_INPUT"}},"#
                + #"{"message":"down","path":["s2"],"extensions":{"code":"INTERNAL_SERVER_ERROR"}}],"#
                + #""data":{"s0":{"__typename":"ResolveIdentifierResult"},"s1":null,"s2":null,"s3":{"ok":true}}}"#,
            count: 4)
        guard case .each(let outcomes) = answer else {
            Issue.record("not per field: \(answer)")
            return
        }
        #expect(outcomes.count == 4)
        #expect(
            outcomes[0]
                == .delivered(response: #"{"data":{"resolveIdentifier":{"__typename":"ResolveIdentifierResult"}}}"#))
        // The kept response is what a single request would have got: the error's path starts at resolveIdentifier.
        #expect(
            outcomes[1]
                == .dead(
                    reason: "GraphQL error: bad timestamp (BAD_USER_INPUT)",
                    response: #"{"data":{"resolveIdentifier":null},"errors":[{"message":"bad timestamp","#
                        + #""path":["resolveIdentifier"],"extensions":{"code":"BAD_USER_INPUT"}}]}"#))
        guard case .retry(let reason, _) = outcomes[2] else {
            Issue.record("s2 is not a retry: \(outcomes[2])")
            return
        }
        #expect(reason.contains("INTERNAL_SERVER_ERROR"))
        #expect(outcomes[3] == .delivered(response: #"{"data":{"resolveIdentifier":{"ok":true}}}"#))
    }

    @Test func aFieldWithNeitherResultNorErrorIsRetried() {
        guard case .each(let outcomes) = classify(200, #"{"data":{"s0":{"ok":true}}}"#) else {
            Issue.record("not per field")
            return
        }
        #expect(outcomes[0] == .delivered(response: #"{"data":{"resolveIdentifier":{"ok":true}}}"#))
        guard case .retry = outcomes[1] else {
            Issue.record("a missing field is not a retry: \(outcomes[1])")
            return
        }
    }

    @Test func aRequestRefusedBeforeExecutionIsARefusedBatch() {
        // HTTP 400 (Apollo 4 for validation errors), or 200 with a validation code and no data.
        #expect(
            classify(
                400, #"{"errors":[{"message":"aliases limit","extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}"#)
                == .refused(reason: "HTTP 400: aliases limit"))
        #expect(
            classify(
                200,
                #"{"errors":[{"message":"Variable \"$i1\" got invalid value","extensions":{"code":"BAD_USER_INPUT"}}]}"#
            )
                == .refused(reason: #"GraphQL error: Variable "$i1" got invalid value (BAD_USER_INPUT)"#))
        #expect(classify(413, "") == .refused(reason: "HTTP 413"))
    }

    @Test func transportLikeAnswersConcernTheWholeBatch() {
        guard
            case .whole(.retry(let reason, let after)) = DeliveryClassifier.classifyBatch(
                status: 503, retryAfterHeader: "7", body: [], count: 3)
        else {
            Issue.record("503 is not a whole retry")
            return
        }
        #expect(reason == "HTTP 503" && after == 7)
        #expect(classify(401, "") == .whole(.authPaused(reason: "HTTP 401: the API refused the token")))
        guard
            case .whole(.redirected) = DeliveryClassifier.classifyBatch(
                status: 302, retryAfterHeader: nil, body: [], location: "https://elsewhere/", count: 2)
        else {
            Issue.record("302 is not a whole redirect")
            return
        }
        guard case .whole(.retry) = classify(200, "<html>proxy</html>") else {
            Issue.record("a body that is not JSON is not a whole retry")
            return
        }
        // An auth error for the request as a whole pauses delivery for all of it.
        guard
            case .whole(.authPaused) = classify(
                200,
                #"{"errors":[{"message":"expired","extensions":{"code":"UNAUTHENTICATED"}}],"data":{"s0":null,"s1":null}}"#
            )
        else {
            Issue.record("a request-level auth error is not a whole pause")
            return
        }
    }

    @Test func theTokenNeverSurvivesIntoAField() {
        let answer = DeliveryClassifier.classifyBatch(
            status: 200, retryAfterHeader: nil,
            body: Array(
                #"{"errors":[{"message":"bad token tok-SECRET-1","path":["s0"]}],"data":{"s0":null,"s1":{}}}"#.utf8),
            secrets: ["tok-SECRET-1"], count: 2)
        guard case .each(let outcomes) = answer else {
            Issue.record("not per field")
            return
        }
        #expect(!"\(outcomes)".contains("tok-SECRET-1"))
    }

    /// JSON may escape any character as `\uXXXX` (RFC 8259, section 7): a token echoed so is none of the spellings
    /// the body's redaction knows, but parsing and re-encoding a field's answer unescapes it, so each field is
    /// redacted again.
    @Test func aTokenEchoedJSONEscapedNeverSurvivesIntoAField() {
        let answer = DeliveryClassifier.classifyBatch(
            status: 200, retryAfterHeader: nil,
            body: Array(#"{"errors":[{"message":"bad token \u0074ok/SECRET","path":["s0"]}],"data":{"s0":null}}"#.utf8),
            secrets: ["tok/SECRET"], count: 1)
        guard case .each(let outcomes) = answer else {
            Issue.record("not per field")
            return
        }
        #expect(!"\(outcomes)".contains("tok/SECRET") && !"\(outcomes)".contains("SECRET"), "\(outcomes)")
    }

    /// The same echo in a single request's refusal: the kept response, decoded as JSON by whoever reads it later,
    /// must not hold the token either.
    @Test func aTokenEchoedJSONEscapedIsNotKeptInARefusal() throws {
        let outcome = DeliveryClassifier.classify(
            status: 400, retryAfterHeader: nil,
            body: Array(#"{"errors":[{"message":"bad token \u0074ok/SECRET"}]}"#.utf8), secrets: ["tok/SECRET"])
        guard case .dead(let reason, let response) = outcome else {
            Issue.record("not dead: \(outcome)")
            return
        }
        let decoded = try JSONParser.parse(Array(response.utf8)).encoded()
        #expect(!decoded.contains("SECRET") && !reason.contains("SECRET"), "\(decoded) / \(reason)")
        // A body without escapes is kept byte for byte.
        let plain = DeliveryClassifier.classify(
            status: 400, retryAfterHeader: nil, body: Array(#"{"errors":[{"message":"no"}]}"#.utf8),
            secrets: ["tok/SECRET"])
        #expect(plain == .dead(reason: "HTTP 400: no", response: #"{"errors":[{"message":"no"}]}"#))
    }
}
