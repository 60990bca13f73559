import BridgeCore
import Foundation

/// `webhook`: every scan POSTed to a local system that takes HTTP (docs/configuration.md, "`webhook`"). No `url`
/// means no webhook.
public struct WebhookConfig: ConfigSection {
    /// `https://...`, or `http://...` (to a loopback host, or anywhere with `allowInsecureHTTP`).
    public var url: String?
    /// A bearer token for `Authorization` (visible ASCII, at least 16 characters, as the API's).
    public var tokenFile: String?
    /// The key of the body's HMAC-SHA256 signature (`X-Plings-Signature-256`).
    public var secretFile: String?
    public var timeout: Double = 10
    /// Scans per request; 1 POSTs each scan's object alone, more POSTs a JSON array.
    public var batchSize = 1
    public var allowInsecureHTTP = false

    public init() {}

    public static let name = "webhook"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.optionalText("webhook.url", \.webhook.url),
        ConfigLoader.optionalText("webhook.tokenFile", \.webhook.tokenFile),
        ConfigLoader.optionalText("webhook.secretFile", \.webhook.secretFile),
        ConfigLoader.number("webhook.timeout", 0.1...600, \.webhook.timeout),
        ConfigLoader.integer("webhook.batchSize", 1...100, \.webhook.batchSize),
        ConfigLoader.flag("webhook.allowInsecureHTTP", \.webhook.allowInsecureHTTP),
    ]

    /// The URL: `https://`, or `http://` to this box (nothing crosses the network) or with `allowInsecureHTTP`;
    /// never with credentials in it.
    public static func validate(_ config: BridgeConfig) throws(ConfigError) {
        guard let url = config.webhook.url else { return }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { throw ConfigError("webhook.url '\(url.prefix(100))' is not a valid URL") }
        if components.user != nil || components.password != nil {
            throw ConfigError("webhook.url must not carry credentials; use webhook.tokenFile")
        }
        switch scheme {
        case "https": return
        case "http" where config.webhook.allowInsecureHTTP || LoopbackHost.contains(host): return
        case "http":
            throw ConfigError(
                "webhook.url uses http:// to '\(host.prefix(64))': scans would cross the network unencrypted; use "
                    + "https://, or set webhook.allowInsecureHTTP for a receiver on a trusted LAN")
        default:
            throw ConfigError("webhook.url scheme '\(scheme.prefix(20))' is not http or https")
        }
    }

    /// The settings the sink runs with, the token and secret read from their files; nil without a URL.
    static func settings(_ config: BridgeConfig) throws(ConfigError) -> WebhookSettings? {
        let webhook = config.webhook
        guard let url = webhook.url else { return nil }
        return WebhookSettings(
            url: url, token: try webhook.tokenFile.map { path throws(ConfigError) in try read(path, "tokenFile") },
            secret: try webhook.secretFile.map { path throws(ConfigError) in try read(path, "secretFile") },
            timeout: webhook.timeout, batchSize: webhook.batchSize,
            allowHTTP: url.lowercased().hasPrefix("http://"))
    }

    /// A credential file's text, checked as the API token is (no part of it in any error).
    static func read(_ path: String, _ key: String) throws(ConfigError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError("webhook.\(key): cannot read \(path.prefix(200))")
        }
        return try APIToken.validate(
            String(decoding: data, as: UTF8.self), source: "webhook.\(key) \(path.prefix(200))")
    }
}

/// What the webhook sink runs with (never logged: it holds the token and the secret).
struct WebhookSettings: Sendable, Equatable {
    var url: String
    var token: String?
    var secret: String?
    var timeout: Double
    var batchSize: Int
    var allowHTTP: Bool
}

extension BridgeConfig {
    /// The `webhook` section.
    public var webhook: WebhookConfig {
        get { sections[WebhookConfig.self] }
        set { sections[WebhookConfig.self] = newValue }
    }
}
