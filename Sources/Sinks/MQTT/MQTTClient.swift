import CMosquittoShim
import Foundation

/// A libmosquitto problem, with libmosquitto's own words.
public struct MQTTError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What the broker or the connection reported (from libmosquitto's callbacks, on the network thread).
public enum MQTTEvent: Sendable {
    /// CONNACK: 0 accepted, else an MQTT v5 reason code.
    case connack(code: Int32)
    /// The connection ended: 0 after our own DISCONNECT, else an error.
    case disconnect(code: Int32)
    /// PUBACK for `mid`: a reason code below 0x80 is success.
    case puback(mid: Int32, code: Int32)
    /// A libmosquitto error or warning line (TLS failures are reported only this way).
    case log(text: String)
}

/// One libmosquitto client (MQTT v5): credentials, TLS and last will set at creation; the network loop is driven
/// by its owner on a dedicated thread (`loop`), and `publish` may be called from any other thread.
///
/// `@unchecked Sendable`: the only state is the libmosquitto handle, which libmosquitto itself locks (it is
/// built thread-safe and `mosquitto_threaded_set` is on), and the immutable event handler.
public final class MQTTClient: @unchecked Sendable {
    private let handle: OpaquePointer
    private let handler: Handler

    /// Holds the Swift closure libmosquitto's C callbacks reach through their context pointer; it lives exactly
    /// as long as the client, which destroys the libmosquitto handle before releasing it.
    private final class Handler {
        let onEvent: @Sendable (MQTTEvent) -> Void
        init(_ onEvent: @escaping @Sendable (MQTTEvent) -> Void) { self.onEvent = onEvent }
    }

    public struct Will: Sendable {
        public var topic: String
        public var payload: String
        public init(topic: String, payload: String) {
            self.topic = topic
            self.payload = payload
        }
    }

    public init(settings: MQTTSettings, will: Will?, onEvent: @escaping @Sendable (MQTTEvent) -> Void)
        throws(MQTTError)
    {
        handler = Handler(onEvent)
        let context = Unmanaged.passUnretained(handler).toOpaque()
        guard
            let mosq = plings_mqtt_new(
                settings.clientID, context,
                { context, kind, code, mid, text in
                    guard let context else { return }
                    let handler = Unmanaged<Handler>.fromOpaque(context).takeUnretainedValue()
                    switch kind {
                    case Int32(PLINGS_MQTT_CONNACK.rawValue): handler.onEvent(.connack(code: code))
                    case Int32(PLINGS_MQTT_DISCONNECT.rawValue): handler.onEvent(.disconnect(code: code))
                    case Int32(PLINGS_MQTT_PUBACK.rawValue): handler.onEvent(.puback(mid: mid, code: code))
                    default: handler.onEvent(.log(text: text.map { String(cString: $0) } ?? ""))
                    }
                }, Int32(settings.maxInflight))
        else { throw MQTTError("cannot create an MQTT client (libmosquitto)") }
        handle = mosq
        mosquitto_threaded_set(mosq, true)
        do throws(MQTTError) {
            if settings.username != nil || settings.password != nil {
                try check(mosquitto_username_pw_set(mosq, settings.username, settings.password), "credentials")
            }
            if settings.tls {
                let rc = mosquitto_tls_set(
                    mosq, settings.caFile, settings.caFile == nil ? "/etc/ssl/certs" : nil, settings.certFile,
                    settings.keyFile, nil)
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    throw MQTTError(
                        "TLS setup failed (\(MQTTClient.describe(rc))): check that mqtt.caFile, mqtt.certFile and "
                            + "mqtt.keyFile are readable PEM files and the key matches the certificate")
                }
            }
            if let will {
                let bytes = Array(will.payload.utf8)
                try check(
                    mosquitto_will_set(mosq, will.topic, Int32(bytes.count), bytes, 1, true), "last will")
            }
        } catch {
            plings_mqtt_destroy(mosq)
            throw error
        }
    }

    deinit { plings_mqtt_destroy(handle) }

    private func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError("\(what): \(MQTTClient.describe(rc))") }
    }

    /// Connects (blocking: DNS, TCP, TLS handshake) and sends CONNECT; the CONNACK arrives through `loop`.
    public func connect(host: String, port: Int, keepalive: Int) -> Int32 {
        mosquitto_connect(handle, host, Int32(port), Int32(keepalive))
    }

    /// Connects again with the same settings (blocking, like `connect`).
    public func reconnect() -> Int32 { mosquitto_reconnect(handle) }

    /// Runs the network for up to `timeoutMilliseconds` (blocking in pselect on the socket; a publish from another
    /// thread wakes it). Anything but success means the connection is gone.
    public func loop(timeoutMilliseconds: Int32) -> Int32 { mosquitto_loop(handle, timeoutMilliseconds, 1) }

    /// Queues a message; returns libmosquitto's result and the message id its PUBACK will carry.
    public func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false) -> (Int32, Int32) {
        var mid: Int32 = 0
        let rc = mosquitto_publish(handle, &mid, topic, Int32(payload.count), payload, qos, retain)
        return (rc, mid)
    }

    /// Sends DISCONNECT (the broker then discards the last will); `loop` ends once it is written.
    public func disconnect() { _ = mosquitto_disconnect(handle) }

    public static func isSuccess(_ rc: Int32) -> Bool { rc == MOSQ_ERR_SUCCESS.rawValue }

    /// True when `mosquitto_publish` found no connection: a QoS 1 message is then kept anyway (libmosquitto queues
    /// it before trying to send it) and sent after the next CONNACK, under the message id it returned.
    public static func isQueuedWithoutConnection(_ rc: Int32) -> Bool { rc == MOSQ_ERR_NO_CONN.rawValue }

    /// True when `rc` says the message itself can never be sent (larger than the broker accepts).
    public static func isOversize(_ rc: Int32) -> Bool {
        rc == MOSQ_ERR_OVERSIZE_PACKET.rawValue || rc == MOSQ_ERR_PAYLOAD_SIZE.rawValue
    }

    /// libmosquitto's text for a result code; for system errors, the errno text.
    public static func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return String(cString: strerror(errno)) }
        if let text = textsMissingFromLibmosquitto[rc] { return text }
        let text = String(cString: mosquitto_strerror(rc))
        if text == "Unknown error." { return "libmosquitto error \(rc)" }
        // Without its full stop: the text is usually quoted inside a longer reason.
        return text.hasSuffix(".") ? String(text.dropLast()) : text
    }

    /// Why a connection ended, from the disconnect callback: a libmosquitto result code, or (0x80 and above) the
    /// MQTT v5 reason code of the broker's own DISCONNECT, e.g. 0x8E when another client took over our client id.
    public static func describeDisconnect(_ code: Int32) -> String {
        code >= 0x80 ? "the broker disconnected us: \(reason(code))" : describe(code)
    }

    /// Result codes libmosquitto 2.0.11's `mosquitto_strerror` answers with "Unknown error." (a hung broker that
    /// still holds the socket ends in MOSQ_ERR_KEEPALIVE: libmosquitto pings after one keepalive of silence and
    /// gives up when the next check finds the ping unanswered).
    static let textsMissingFromLibmosquitto: [Int32: String] = [
        MOSQ_ERR_UNKNOWN.rawValue: "unknown error",
        MOSQ_ERR_KEEPALIVE.rawValue: "the broker did not answer a keepalive ping (mqtt.keepalive)",
        MOSQ_ERR_LOOKUP.rawValue: "host name lookup failed",
        MOSQ_ERR_MALFORMED_PACKET.rawValue: "the broker sent a malformed packet",
        MOSQ_ERR_TIMEOUT.rawValue: "timed out",
        MOSQ_ERR_RETAIN_NOT_SUPPORTED.rawValue: "the broker does not support retained messages",
        MOSQ_ERR_TOPIC_ALIAS_INVALID.rawValue: "invalid topic alias",
        MOSQ_ERR_ADMINISTRATIVE_ACTION.rawValue: "disconnected by the broker's administrator",
    ]

    /// The MQTT v5 reason code's name (CONNACK, PUBACK, DISCONNECT).
    public static func reason(_ code: Int32) -> String {
        "\(String(cString: mosquitto_reason_string(code))) (0x\(String(code, radix: 16)))"
    }

    /// CONNACK codes that mean "these credentials or this client are not welcome": retrying soon is pointless.
    public static func isAuthRefusal(_ code: Int32) -> Bool {
        [0x85, 0x86, 0x87, 0x8A, 0x8C].contains(code)
    }

    /// SHA-256 in hex (libcrypto), for the default device id.
    public static func sha256Hex(_ text: String) -> String {
        var out = [CChar](repeating: 0, count: 65)
        let bytes = Array(text.utf8)
        plings_sha256_hex(bytes, bytes.count, &out)
        return String(cString: out)
    }
}
