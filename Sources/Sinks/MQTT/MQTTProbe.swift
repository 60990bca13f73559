import Foundation
import Platform

/// `doctor`'s broker check: connect, log in, publish one QoS 1 message to the device's doctor topic and wait for
/// its PUBACK, all within `timeout`, on the calling thread (a CLI command; nothing else runs).
public enum MQTTProbe {
    public enum Result: Sendable, Equatable {
        case ok
        /// Connected, but the broker refused the login (bad credentials, not authorized).
        case refused(String)
        /// Logged in, but the broker refused the test message (its ACL does not let this device publish).
        case publishRefused(String)
        case unreachable(String)
    }

    public static func run(_ service: MQTTSettings, timeout: Double = 5) -> Result {
        var settings = service
        settings.clientIDSuffix = "-doctor-\(getpid())"
        let events = Mutex<[MQTTEvent]>([])
        let client: MQTTClient
        do {
            // No last will: the probe is not the device going offline.
            client = try MQTTClient(settings: settings, will: nil) { event in events.withLock { $0.append(event) } }
        } catch {
            return .unreachable(error.description)
        }
        let deadline = MonotonicClock.deadline(after: timeout)
        var rc = client.connect(host: settings.host, port: settings.port, keepalive: 10)
        guard MQTTClient.isSuccess(rc) else { return .unreachable(MQTTClient.describe(rc)) }
        var mid: Int32?
        defer { client.disconnect() }
        while MonotonicClock.now() < deadline {
            rc = client.loop(timeoutMilliseconds: 200)
            for event in events.withLock({ e in
                defer { e.removeAll() }; return e
            }) {
                switch event {
                case .connack(let code) where code == 0:
                    let payload = Array(#"{"doctor":true}"#.utf8)
                    let (prc, m) = client.publish(topic: settings.doctorTopic, payload: payload)
                    guard MQTTClient.isSuccess(prc) else { return .unreachable(MQTTClient.describe(prc)) }
                    mid = m
                case .connack(let code): return .refused(MQTTClient.reason(code))
                case .puback(let m, let code) where m == mid:
                    return code < 0x80 ? .ok : .publishRefused(MQTTClient.reason(code))
                case .log(let text): if !MQTTClient.isSuccess(rc) { return .unreachable(text) }
                default: break
                }
            }
            if !MQTTClient.isSuccess(rc) { return .unreachable(MQTTClient.describe(rc)) }
        }
        return .unreachable(
            mid == nil ? "no answer to CONNECT within \(Int(timeout)) s" : "no PUBACK within \(Int(timeout)) s")
    }
}
