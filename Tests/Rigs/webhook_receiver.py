#!/usr/bin/env python3
"""A webhook receiver stand-in for plings-bridge's `webhook` sink (docs/contracts.md, "Webhook request").

It checks each request as a strict receiver would: `Content-Type: application/json`, an `Idempotency-Key`, the
bearer token (`--token-file`), and the body's HMAC-SHA256 signature (`--secret-file`) computed here with Python's
`hmac` module, the outside authority for the bridge's signature. A request that fails a check gets 401 and is
recorded with why. Faults are switched at run time, so a test can make the receiver fail the ways a real one does.

Control (JSON):
  POST /_control/mode   {"mode": "ok"|"500"|"429"|"slow"|"close"|"413-batch"|"redirect", "retryAfter": s,
                         "delay": s, "refuse": [scan ids answered 422]}
  GET  /_control/requests?min=N&wait=S   every request so far: {"key", "expectedKey", "ids", "batch", "status",
                                         "signature", "error", "at"}
Prints `READY port=N` on stdout once listening.
"""

import argparse
import hashlib
import hmac
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Receiver:
    def __init__(self, token, secret):
        self.token = token
        self.secret = secret
        self.lock = threading.Condition()
        self.mode = {"mode": "ok"}
        self.requests = []

    def record(self, entry):
        with self.lock:
            entry["at"] = time.time()
            self.requests.append(entry)
            self.lock.notify_all()

    def wait_for(self, minimum, wait):
        deadline = time.monotonic() + wait
        with self.lock:
            while len(self.requests) < minimum and time.monotonic() < deadline:
                self.lock.wait(max(0.0, deadline - time.monotonic()))
            return list(self.requests)


def read_secret(path):
    if path is None:
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def make_handler(receiver):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def _send(self, status, body=b"", headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status, obj):
            self._send(status, json.dumps(obj).encode(), [("Content-Type", "application/json")])

        def do_GET(self):
            url = urlparse(self.path)
            if url.path != "/_control/requests":
                return self._send(404)
            query = parse_qs(url.query)
            minimum = int(query.get("min", ["0"])[0])
            wait = float(query.get("wait", ["0"])[0])
            self._json(200, {"requests": receiver.wait_for(minimum, wait)})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.path == "/_control/mode":
                with receiver.lock:
                    receiver.mode = json.loads(body)
                return self._json(200, {"ok": True})
            self.hook(body)

        def hook(self, body):
            mode = dict(receiver.mode)
            # The body's SHA-256, so a test can tell whether two tries under one key carried the same bytes.
            entry = {"key": self.headers.get("Idempotency-Key"), "ids": [], "status": None, "signature": None,
                     "error": None, "bodyDigest": hashlib.sha256(body).hexdigest()}
            problem = None
            if self.headers.get("Content-Type") != "application/json":
                problem = "Content-Type is %r" % self.headers.get("Content-Type")
            elif not entry["key"]:
                problem = "no Idempotency-Key"
            elif receiver.token is not None and self.headers.get("Authorization") != "Bearer " + receiver.token:
                problem = "wrong or missing bearer token"
            if receiver.secret is not None:
                expected = "sha256=" + hmac.new(receiver.secret.encode(), body, hashlib.sha256).hexdigest()
                given = self.headers.get("X-Plings-Signature-256", "")
                entry["signature"] = hmac.compare_digest(expected, given)
                if not entry["signature"] and problem is None:
                    problem = "signature does not match"
            try:
                parsed = json.loads(body)
                scans = parsed if isinstance(parsed, list) else [parsed]
                entry["ids"] = [scan["id"] for scan in scans]
                entry["batch"] = isinstance(parsed, list)
                # The key the contract gives a request of several scans: SHA-256 over their ids, one per line.
                joined = "\n".join(entry["ids"]).encode()
                entry["expectedKey"] = entry["ids"][0] if len(entry["ids"]) == 1 else hashlib.sha256(joined).hexdigest()
            except (ValueError, KeyError, TypeError) as error:
                problem = problem or "body is not a scan or an array of scans: %s" % error
            if problem is not None:
                entry["status"], entry["error"] = 401, problem
                receiver.record(entry)
                return self._json(401, {"error": problem})
            name = mode.get("mode", "ok")
            refused = set(mode.get("refuse", []))
            if name == "close":
                entry["status"] = "closed"
                receiver.record(entry)
                self.close_connection = True
                self.connection.shutdown(2)
                return None
            if name == "slow":
                time.sleep(float(mode.get("delay", 2)))
            status, headers = 200, []
            if refused.intersection(entry["ids"]):
                status = 422
            elif name == "500":
                status = 500
            elif name == "429":
                status, headers = 429, [("Retry-After", str(mode.get("retryAfter", 1)))]
            elif name == "413-batch" and len(entry["ids"]) > 1:
                status = 413
            elif name == "redirect":
                status, headers = 302, [("Location", "https://elsewhere.invalid/hook")]
            entry["status"] = status
            receiver.record(entry)
            self._send(status, b'{"ok":%s}' % (b"true" if status == 200 else b"false"), headers)

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-file")
    parser.add_argument("--secret-file")
    args = parser.parse_args()
    receiver = Receiver(read_secret(args.token_file), read_secret(args.secret_file))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(receiver))
    server.daemon_threads = True
    print("READY port=%d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
