#!/usr/bin/env python3
"""Plain server-sent events clients for the local HTTP interface's tests (no browser, no library).

Opens CLIENTS connections to URL (GET, `Accept: text/event-stream`, optional `Last-Event-ID`), parses the stream
as the HTML Living Standard's "Server-sent events" section 9.2.6 says (fields, `data` lines joined by LF, events
dispatched on a blank line, comments ignored) and prints one JSON line per dispatched event:
  {"client": 0, "id": "12", "event": "message", "data": "...", "t": <CLOCK_MONOTONIC seconds>}
Each client prints {"client": n, "open": true, "t": ...} once its response headers arrive.

--stalled K makes K more connections that send the request and then never read (a tiny receive buffer), as a
browser tab frozen in the background would. Runs until killed or --seconds pass.
"""
import argparse
import http.client
import json
import socket
import sys
import threading
import time
import urllib.parse

lock = threading.Lock()


def emit(record):
    record["t"] = time.clock_gettime(time.CLOCK_MONOTONIC)
    with lock:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def client(n, url, last_event_id, headers):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    request_headers = {"Accept": "text/event-stream", **headers}
    if last_event_id is not None:
        request_headers["Last-Event-ID"] = last_event_id
    connection.request("GET", parts.path + ("?" + parts.query if parts.query else ""), headers=request_headers)
    response = connection.getresponse()
    emit({"client": n, "open": True, "status": response.status,
          "type": response.getheader("Content-Type")})
    if response.status != 200:
        return
    event, data, last_id = "", [], ""
    while True:
        raw = response.readline()
        if not raw:
            emit({"client": n, "closed": True})
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data:
                emit({"client": n, "id": last_id, "event": event or "message", "data": "\n".join(data)})
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id" and "\0" not in value:
            last_id = value


def stalled(url):
    parts = urllib.parse.urlsplit(url)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect((parts.hostname, parts.port))
    target = parts.path + ("?" + parts.query if parts.query else "")
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n\r\n".encode())
    return s


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--stalled", type=int, default=0)
    parser.add_argument("--last-event-id")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)
    held = [stalled(args.url) for _ in range(args.stalled)]
    for n in range(args.clients):
        threading.Thread(target=client, args=(n, args.url, args.last_event_id, headers), daemon=True).start()
    emit({"started": True, "stalled": len(held)})
    time.sleep(args.seconds)


if __name__ == "__main__":
    main()
