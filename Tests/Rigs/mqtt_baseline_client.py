#!/usr/bin/python3
"""Benchmark baseline for `plings-bench mqtt`: how fast a plain paho-mqtt client (Debian python3-paho-mqtt)
publishes the same messages at QoS 1 with the same in-flight window.

Reads --messages (one "TOPIC<TAB>PAYLOAD" line each), connects (MQTT v5, like plings-bridge), publishes them all
at QoS 1 with at most --inflight unacknowledged, and waits for every PUBACK. Prints one JSON line:
{"count":N,"seconds":S,"perSecond":R}. The time runs from connect to the last PUBACK.

Usage: mqtt_baseline_client.py --port P --messages FILE --inflight W
"""

import argparse
import json
import sys
import threading
import time

import paho.mqtt.client as mqtt


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--messages", required=True)
    parser.add_argument("--inflight", type=int, default=20)
    args = parser.parse_args()
    messages = []
    with open(args.messages, encoding="utf-8") as f:
        for line in f:
            topic, payload = line.rstrip("\n").split("\t", 1)
            messages.append((topic, payload.encode("utf-8")))

    done = threading.Event()
    acked = [0]
    connected = threading.Event()
    client = mqtt.Client(client_id="plings-bench-baseline", protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(args.inflight)
    client.max_queued_messages_set(0)

    def on_connect(c, userdata, flags, rc, properties=None):
        connected.set()

    def on_publish(c, userdata, mid):
        acked[0] += 1
        if acked[0] == len(messages):
            done.set()

    client.on_connect = on_connect
    client.on_publish = on_publish
    start = time.monotonic()
    client.connect(args.host, args.port, keepalive=60)
    client.loop_start()
    connected.wait(10)
    for topic, payload in messages:
        client.publish(topic, payload, qos=1)
    done.wait(3600)
    seconds = time.monotonic() - start
    client.disconnect()
    client.loop_stop()
    print(json.dumps({"count": acked[0], "seconds": seconds, "perSecond": acked[0] / seconds}))
    return 0 if acked[0] == len(messages) else 1


if __name__ == "__main__":
    sys.exit(main())
