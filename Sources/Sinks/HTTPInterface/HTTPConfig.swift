import BridgeCore
import Foundation

/// `http`: the local HTTP interface (docs/configuration.md, "`http`"): the bench page, `/events`, `/scans`,
/// `/status`, `/metrics`, `/healthz`, `/readyz`. On by default on a loopback port; an empty `listen` turns it off.
public struct HTTPConfig: ConfigSection {
    /// `address:port`, numeric (`127.0.0.1:8731`, `[::1]:8731`, `0.0.0.0:8731`); empty: off.
    public var listen = HTTPConfig.defaultListen
    /// A file holding the token every request must present; needed to listen beyond loopback.
    public var tokenFile: String?
    /// PEM certificate chain and key: HTTPS instead of HTTP.
    public var certFile: String?
    public var keyFile: String?
    /// Connections at once (a live page holds one or two). One thread serves them all; at the limit the oldest
    /// connection still waiting for a request is closed to make room.
    public var maxClients = 1024
    /// Seconds a browser stays signed in after the form (a day: one sign-in per shift); at most a week.
    public var sessionLifetime: Double = 86_400

    public static let defaultListen = "127.0.0.1:8731"

    public init() {}

    public static let name = "http"

    public static let keys: [ConfigLoader.Key] = [
        ConfigLoader.text("http.listen", \.http.listen, allowEmpty: true) { text in
            guard !text.isEmpty, case .failure(let error) = ListenAddress.parse(text) else { return nil }
            return error.description
        },
        ConfigLoader.optionalText("http.tokenFile", \.http.tokenFile),
        ConfigLoader.optionalText("http.certFile", \.http.certFile),
        ConfigLoader.optionalText("http.keyFile", \.http.keyFile),
        ConfigLoader.integer("http.maxClients", 1...16384, \.http.maxClients),
        ConfigLoader.number("http.sessionLifetime", 10...604_800, \.http.sessionLifetime),
    ]

    /// A listener beyond loopback needs a token; a certificate needs its key.
    public static func validate(_ config: BridgeConfig) throws(ConfigError) {
        let http = config.http
        if (http.certFile == nil) != (http.keyFile == nil) {
            throw ConfigError("http.certFile and http.keyFile go together (a certificate needs its key)")
        }
        guard let address = http.address else { return }
        if !address.isLoopback, http.tokenFile == nil {
            throw ConfigError(
                "http.listen \(address) is reachable from other machines; set http.tokenFile, or listen on 127.0.0.1")
        }
    }

    /// The parsed `listen`, nil when off (or malformed: the key's own check has said so).
    public var address: ListenAddress? {
        guard !listen.isEmpty, case .success(let address) = ListenAddress.parse(listen) else { return nil }
        return address
    }

    /// What the server runs with, files read: the token's first line, the certificate and key.
    func settings() throws(ConfigError) -> HTTPSettings? {
        guard let address else { return nil }
        let token = try tokenFile.map { (path: String) throws(ConfigError) in
            try Self.read(path, "http.tokenFile", firstLine: true)
        }
        let cert = try certFile.map { (path: String) throws(ConfigError) in try Self.read(path, "http.certFile") }
        let key = try keyFile.map { (path: String) throws(ConfigError) in try Self.read(path, "http.keyFile") }
        return HTTPSettings(
            address: address, token: token, certificate: cert, key: key, maxClients: maxClients,
            sessionLifetime: sessionLifetime)
    }

    private static func read(_ path: String, _ key: String, firstLine: Bool = false) throws(ConfigError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError("\(key): cannot read \(path)")
        }
        var text = String(decoding: data, as: UTF8.self)
        if firstLine { text = String(text.split(whereSeparator: \.isNewline).first ?? "").trimmingASCIIWhitespace() }
        guard !text.isEmpty else { throw ConfigError("\(key): \(path) is empty") }
        return text
    }
}

/// The interface's resolved settings. The token is held only here and in the access policy; it is never logged
/// and never part of a description.
struct HTTPSettings: Sendable, Equatable {
    var address: ListenAddress
    var token: String?
    var certificate: String?
    var key: String?
    var maxClients: Int
    var sessionLifetime: Double
    var tls: Bool { certificate != nil }
    /// Where a browser finds the page.
    var url: String { "\(tls ? "https" : "http")://\(address)/" }
}

extension BridgeConfig {
    /// The `http` section.
    public var http: HTTPConfig {
        get { sections[HTTPConfig.self] }
        set { sections[HTTPConfig.self] = newValue }
    }
}
