#!/usr/bin/python3
"""Test subscriber for the MQTT sink's tests (Debian python3-paho-mqtt, MQTT 3.1.1).

Subscribes to --topic at QoS 1 and prints one line per message: TOPIC<TAB>PAYLOAD (payload as UTF-8 text), and
"SUBSCRIBED" after every SUBACK (the tests wait for it). Reconnects at once after the broker goes away (0.1 s to
1 s), so a restarted broker finds it subscribed again before the bridge's backoff (at least 0.75 s) is over.
With --session ID the session is persistent (clean_session false): messages for it are queued while it is away.

Usage: mqtt_sub.py --port P --topic T [--session ID] [--cafile F] [--username U --password-file F]
"""

import argparse
import ssl
import sys

import paho.mqtt.client as mqtt


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--session")
    parser.add_argument("--cafile")
    parser.add_argument("--username")
    parser.add_argument("--password-file")
    args = parser.parse_args()

    client = mqtt.Client(client_id=args.session or "", clean_session=args.session is None)
    if args.username:
        password = open(args.password_file).read().strip() if args.password_file else None
        client.username_pw_set(args.username, password)
    if args.cafile:
        client.tls_set(ca_certs=args.cafile, cert_reqs=ssl.CERT_REQUIRED)
    client.reconnect_delay_set(min_delay=0.1, max_delay=1)

    def on_connect(c, userdata, flags, rc):
        # Whether the broker still had this persistent session (after a restart: whether it restored it).
        print(f"CONNECTED rc={rc} sessionPresent={flags.get('session present', 0)}", flush=True)
        if rc == 0:
            c.subscribe(args.topic, qos=1)

    def on_subscribe(c, userdata, mid, granted):
        print("SUBSCRIBED", flush=True)

    def on_message(c, userdata, msg):
        print(msg.topic + "\t" + msg.payload.decode("utf-8", "replace"), flush=True)

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.connect_async(args.host, args.port, keepalive=10)
    client.loop_forever(retry_first_connection=True)


if __name__ == "__main__":
    sys.exit(main())
