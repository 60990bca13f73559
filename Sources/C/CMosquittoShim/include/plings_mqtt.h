#ifndef PLINGS_MQTT_H
#define PLINGS_MQTT_H

#include <stddef.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

/// What libmosquitto's callbacks report, folded into one function so Swift registers a single C callback.
enum plings_mqtt_event_kind {
    PLINGS_MQTT_CONNACK = 1,     ///< code: the CONNACK reason code (0 accepted)
    PLINGS_MQTT_DISCONNECT = 2,  ///< code: 0 after our own disconnect, else why the connection ended
    PLINGS_MQTT_PUBACK = 3,      ///< mid: the message; code: the PUBACK reason code (< 0x80 success)
    PLINGS_MQTT_LOG = 4,         ///< code: the MOSQ_LOG_* level; text: libmosquitto's message (TLS errors)
};

typedef void (*plings_mqtt_event_fn)(void *context, int kind, int code, int mid, const char *text);

/// A new MQTT v5 client with the callbacks wired to `fn(context, ...)`; NULL when out of memory.
/// `max_inflight` bounds unacknowledged QoS 1 messages (libmosquitto queues beyond it).
struct mosquitto *plings_mqtt_new(const char *client_id, void *context, plings_mqtt_event_fn fn, int max_inflight);

/// Destroys a client made by plings_mqtt_new (after its network loop has stopped) and frees its context.
void plings_mqtt_destroy(struct mosquitto *mosq);

/// SHA-256 of `len` bytes as 64 lowercase hex digits and a NUL (OpenSSL's libcrypto).
void plings_sha256_hex(const void *data, size_t len, char out[65]);

#endif
