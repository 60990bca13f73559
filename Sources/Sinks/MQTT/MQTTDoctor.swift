import BridgeCore
import Foundation
import SinkKit

/// `doctor`'s broker check, read-only for the running service (its own client id).
enum MQTTDoctor {
    /// Connects to the configured broker, logs in and publishes one QoS 1 message to `<base>/doctor`.
    static func check(_ context: SinkDoctorContext) -> DoctorCheck {
        let config = context.configuration.config
        let mqtt: MQTTSettings
        do {
            guard let resolved = try MQTTConfig.settings(config) else {
                return DoctorCheck("mqtt", .skip, "no mqtt.url: scans are not published to a broker")
            }
            mqtt = resolved
        } catch {
            if let skip = context.unreadableCredential(
                [config.mqtt.usernameFile, config.mqtt.passwordFile], check: "mqtt",
                subject: "mqtt.url is \(config.mqtt.url ?? "")", what: "the broker login")
            {
                return skip
            }
            return DoctorCheck(
                "mqtt", .fail, error.description, fix: "correct the mqtt section (docs/configuration.md)")
        }
        switch MQTTProbe.run(mqtt) {
        case .ok:
            return DoctorCheck(
                "mqtt", .ok, "\(mqtt.endpoint) accepted the login and a QoS 1 publish to \(mqtt.doctorTopic)")
        case .refused(let reason):
            return DoctorCheck(
                "mqtt", .fail, "\(mqtt.endpoint) refused the login: \(reason)",
                fix: "check mqtt.usernameFile/passwordFile (or the client certificate) and the broker's user list")
        case .publishRefused(let reason):
            return DoctorCheck(
                "mqtt", .fail, "\(mqtt.endpoint) refused publishing to \(mqtt.doctorTopic): \(reason)",
                fix: "let this device publish under \(mqtt.topicBase)/# in the broker's ACL")
        case .unreachable(let reason):
            return DoctorCheck(
                "mqtt", .fail, "\(mqtt.endpoint) not usable: \(reason)",
                fix: "check the network, mqtt.url and TLS files; scans stay queued in the spool meanwhile")
        }
    }
}
