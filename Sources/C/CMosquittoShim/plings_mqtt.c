#include "plings_mqtt.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>

struct plings_mqtt_context {
    void *context;
    plings_mqtt_event_fn fn;
};

static void on_connect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props) {
    (void)mosq; (void)flags; (void)props;
    struct plings_mqtt_context *c = obj;
    c->fn(c->context, PLINGS_MQTT_CONNACK, rc, 0, NULL);
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc, const mosquitto_property *props) {
    (void)mosq; (void)props;
    struct plings_mqtt_context *c = obj;
    c->fn(c->context, PLINGS_MQTT_DISCONNECT, rc, 0, NULL);
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid, int reason, const mosquitto_property *props) {
    (void)mosq; (void)props;
    struct plings_mqtt_context *c = obj;
    c->fn(c->context, PLINGS_MQTT_PUBACK, reason, mid, NULL);
}

static void on_log(struct mosquitto *mosq, void *obj, int level, const char *text) {
    (void)mosq;
    struct plings_mqtt_context *c = obj;
    // Only problems: debug and notice lines would be one per packet.
    if (level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING)) c->fn(c->context, PLINGS_MQTT_LOG, level, 0, text);
}

struct mosquitto *plings_mqtt_new(const char *client_id, void *context, plings_mqtt_event_fn fn, int max_inflight) {
    static int initialised = 0;
    if (!initialised) {
        mosquitto_lib_init();
        initialised = 1;
    }
    struct plings_mqtt_context *c = malloc(sizeof *c);
    if (!c) return NULL;
    c->context = context;
    c->fn = fn;
    struct mosquitto *mosq = mosquitto_new(client_id, true, c);
    if (!mosq) {
        free(c);
        return NULL;
    }
    mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, max_inflight);
    mosquitto_max_inflight_messages_set(mosq, (unsigned int)max_inflight);
    mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_connect_v5_callback_set(mosq, on_connect);
    mosquitto_disconnect_v5_callback_set(mosq, on_disconnect);
    mosquitto_publish_v5_callback_set(mosq, on_publish);
    mosquitto_log_callback_set(mosq, on_log);
    return mosq;
}

void plings_mqtt_destroy(struct mosquitto *mosq) {
    if (!mosq) return;
    void *c = mosquitto_userdata(mosq);
    mosquitto_destroy(mosq);
    free(c);
}

void plings_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(data, len, digest);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
}
