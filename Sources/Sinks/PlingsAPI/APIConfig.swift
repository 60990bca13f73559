import BridgeCore
import Foundation

/// `api`: where and how scans are delivered (docs/configuration.md, "`api`"). No `url`: no API sink.
public struct APIConfig: ConfigSection {
    public var url: String?
    public var tokenFile: String?
    public var document: String = GraphQLRequestBody.defaultDocument
    public var timeout: Double = 10
    public var concurrency: Int = 4
    /// Scans per request when several are due at once (docs/contracts.md, "Batched request"); 1 sends each alone.
    public var batchSize: Int = 25
    public var allowInsecureHTTP = false

    public init() {}

    public static let name = "api"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.optionalText("api.url", \.api.url),
        ConfigLoader.optionalText("api.tokenFile", \.api.tokenFile),
        ConfigLoader.text("api.document", \.api.document),
        ConfigLoader.number("api.timeout", 0.1...600, \.api.timeout),
        ConfigLoader.integer("api.concurrency", 1...64, \.api.concurrency),
        ConfigLoader.integer("api.batchSize", 1...100, \.api.batchSize),
        ConfigLoader.flag("api.allowInsecureHTTP", \.api.allowInsecureHTTP),
    ]

    /// The URL: `https://` always, `http://` only with `allowInsecureHTTP` and a loopback host, never with
    /// credentials in it.
    public static func validate(_ config: BridgeConfig) throws(ConfigError) {
        let api = config.api
        guard let url = api.url else { return }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { throw ConfigError("api.url '\(url.prefix(100))' is not a valid URL") }
        if components.user != nil || components.password != nil {
            throw ConfigError("api.url must not carry credentials; use api.tokenFile")
        }
        switch scheme {
        case "https": return
        case "http":
            guard api.allowInsecureHTTP else {
                throw ConfigError(
                    "api.url uses http://; set api.allowInsecureHTTP (loopback hosts only) or use https://")
            }
            guard LoopbackHost.contains(host) else {
                throw ConfigError("api.url: http:// is allowed only to loopback addresses, not '\(host)'")
            }
        default:
            throw ConfigError("api.url scheme '\(scheme)' is not https")
        }
    }
}

extension BridgeConfig {
    /// The `api` section.
    public var api: APIConfig {
        get { sections[APIConfig.self] }
        set { sections[APIConfig.self] = newValue }
    }
}
