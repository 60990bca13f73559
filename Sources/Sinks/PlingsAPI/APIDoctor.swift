import BridgeCore
import Foundation
import HTTPTransport
import SinkKit

/// `doctor`'s API check: one harmless request with the token, read-only for the running service.
enum APIDoctor {
    static func checks(_ context: SinkDoctorContext) -> [DoctorCheck] {
        let configuration = context.configuration
        if let url = configuration.config.api.url, configuration.apiToken == nil, let path = context.unreadableToken {
            return [
                DoctorCheck(
                    "api", .skip,
                    "api.url is \(url); this user cannot read the token file \(path), so the token is not checked "
                        + "(the service reads it)",
                    fix: "run doctor as root to check the token: sudo plings-bridge doctor")
            ]
        }
        guard let api = APISettings(configuration) else {
            return [
                DoctorCheck(
                    "api", .skip, "no api.url: scans stay in the local spool", fix: "set api.url and a token to deliver"
                )
            ]
        }
        guard let client = HTTPClient() else { return [DoctorCheck("api", .fail, "cannot create an HTTP client")] }
        // A harmless request: every GraphQL server answers `{ __typename }`; the token is checked all the same.
        let body = Array(#"{"query":"query { __typename }"}"#.utf8)
        var headers = Delivery.headers(settings: api, key: "doctor-\(UUID().uuidString.lowercased())")
        headers.removeAll { $0.hasPrefix("Idempotency-Key") }
        do {
            let response = try client.post(
                url: api.url, headers: headers, body: body, timeout: min(api.timeout, 10),
                allowHTTP: api.allowInsecureHTTP)
            switch response.status {
            case 200..<300:
                return [DoctorCheck("api", .ok, "\(api.url) reachable, token accepted (HTTP \(response.status))")]
            case 401, 403:
                return [
                    DoctorCheck(
                        "api", .fail, "\(api.url) refused the token (HTTP \(response.status))",
                        fix: "put a valid token in /etc/plings-bridge/token (or api.tokenFile) and reload")
                ]
            case 300..<400:
                return [
                    DoctorCheck(
                        "api", .fail,
                        "\(api.url) redirects (HTTP \(response.status)) to \(response.location ?? "no Location"): "
                            + "delivery pauses (redirects are never followed)",
                        fix: "set api.url to the final URL and reload")
                ]
            default:
                return [
                    DoctorCheck(
                        "api", .warn, "\(api.url) answered HTTP \(response.status)",
                        fix: "check api.url and the API's status")
                ]
            }
        } catch {
            return [
                DoctorCheck(
                    "api", .fail, "\(api.url) not reachable: \(error.description)",
                    fix: "check the network, DNS and api.url; scans are kept in the spool meanwhile")
            ]
        }
    }
}
