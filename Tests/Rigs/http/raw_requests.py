#!/usr/bin/env python3
"""Sends raw HTTP/1.1 requests, byte for byte, one connection each, and prints what came back as JSON lines:
{"name", "status", "statusLines", "headers", "closed"}. Requests come on stdin as a JSON object name -> request
text ("\\u0000" in JSON for a NUL byte). `statusLines` counts status lines in the answer (a header block written
twice shows as 2); `closed` is whether the server closed the connection after answering; `seconds` is how long the
answer's first byte took (the connection stays open after sending, so a server waiting for more shows here).

    raw_requests.py PORT [CA_FILE] < requests.json    # with CA_FILE: over TLS, the server verified by it
"""

import json
import socket
import ssl
import sys
import time


def send(port, data, ca_file=None):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if ca_file:
        sock = ssl.create_default_context(cafile=ca_file).wrap_socket(sock, server_hostname="127.0.0.1")
    sock.sendall(data)
    sent = time.monotonic()
    answer, closed, first = b"", False, None
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            if first is None:
                first = time.monotonic() - sent
            answer += chunk
    except socket.timeout:
        pass
    except (ssl.SSLEOFError, ConnectionResetError):
        closed = True
    sock.close()
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return {"status": status, "statusLines": answer.count(b"HTTP/1.1 "), "headers": headers, "closed": closed,
            "seconds": first}


def main():
    port = int(sys.argv[1])
    ca_file = sys.argv[2] if len(sys.argv) > 2 else None
    for name, text in json.load(sys.stdin).items():
        result = send(port, text.encode("latin-1"), ca_file)
        result["name"] = name
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
