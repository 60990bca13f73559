import BridgeCore
import Foundation

/// Where and how to publish: the `mqtt` section resolved, with the credentials read from their files.
public struct MQTTSettings: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// `mqtts://`: TLS, verified against `caFile` (else the system's CA directory) and the host name.
    public var tls: Bool
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var username: String?
    /// Never logged, never in an error message, never on argv.
    public var password: String?
    /// `<topicPrefix>/<site>/<deviceId>`.
    public var topicBase: String
    public var deviceID: String
    public var keepalive: Int
    /// Unacknowledged QoS 1 messages at most.
    public var maxInflight: Int
    /// Home Assistant's discovery prefix when its discovery messages are published; nil: none.
    public var homeAssistantPrefix: String?

    public init(
        host: String, port: Int, tls: Bool, caFile: String?, certFile: String?, keyFile: String?, username: String?,
        password: String?, topicBase: String, deviceID: String, keepalive: Int, maxInflight: Int,
        homeAssistantPrefix: String? = nil
    ) {
        self.homeAssistantPrefix = homeAssistantPrefix
        self.host = host
        self.port = port
        self.tls = tls
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.username = username
        self.password = password
        self.topicBase = topicBase
        self.deviceID = deviceID
        self.keepalive = keepalive
        self.maxInflight = maxInflight
    }

    public var scansTopic: String { topicBase + "/scans" }
    public var unrecognizedTopic: String { topicBase + "/unrecognized" }
    public var statusTopic: String { topicBase + "/status" }
    /// `doctor` publishes here (QoS 1, not retained) to prove the broker's ACL lets this device publish.
    public var doctorTopic: String { topicBase + "/doctor" }
    /// Appended to the client id: a probe (`doctor`) connects as its own client, so the broker never hands it the
    /// service's session (and drops the service's connection).
    public var clientIDSuffix = ""
    /// One client id per device, so two devices never take over each other's session.
    public var clientID: String { "plings-bridge-" + deviceID + clientIDSuffix }
    /// `mqtt://host:port` or `mqtts://host:port`, for logs.
    public var endpoint: String {
        (tls ? "mqtts://" : "mqtt://") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    /// The topic a scan goes to: recognized reads under `/scans`, unrecognized ones under `/unrecognized`.
    public func topic(for record: ScanRecord) -> String {
        record.inputJSON == nil ? unrecognizedTopic : scansTopic
    }
}
