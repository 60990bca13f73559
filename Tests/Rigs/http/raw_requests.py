#!/usr/bin/env python3
"""Sends raw HTTP/1.1 requests, byte for byte, one connection each, and prints what came back as JSON lines:
{"name", "status", "statusLines", "headers", "closed"}. Requests come on stdin as a JSON object name -> request
text ("\\u0000" in JSON for a NUL byte). `statusLines` counts status lines in the answer (a header block written
twice shows as 2); `closed` is whether the server closed the connection after answering.

    raw_requests.py PORT < requests.json
"""

import json
import socket
import sys


def send(port, data):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(data)
    answer, closed = b"", False
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            answer += chunk
    except socket.timeout:
        pass
    sock.close()
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return {"status": status, "statusLines": answer.count(b"HTTP/1.1 "), "headers": headers, "closed": closed}


def main():
    port = int(sys.argv[1])
    for name, text in json.load(sys.stdin).items():
        result = send(port, text.encode("latin-1"))
        result["name"] = name
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
