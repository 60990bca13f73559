#!/usr/bin/python3
"""Benchmark baseline: how fast a plain Python client can deliver the requests of docs/contracts.md.

Sends --count POSTs of the exact plings-bridge request (its input, headers and body)
from --concurrency threads, each on its own persistent keep-alive connection with TCP_NODELAY,
and prints one JSON line: {"count":N,"concurrency":C,"seconds":S,"perSecond":R,"failures":F}.
A request fails unless it gets HTTP 200 with data.resolveIdentifier and no errors.
Exit status: 0 with no failures, 1 otherwise. Standard library only.

Usage: api_baseline_client.py --url http://127.0.0.1:PORT/graphql --token-file F --count N --concurrency C
"""

import argparse
import datetime
import http.client
import itertools
import json
import random
import socket
import sys
import threading
import time
import urllib.parse
import uuid

DOCUMENT = ("mutation ResolveIdentifier($input: ResolveIdentifierInput!) "
            "{ resolveIdentifier(input: $input) { __typename } }")
USER_AGENT = "plings-bridge/0.0.0-baseline"
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def timestamp_now():
    # RFC 3339 UTC with milliseconds and 'Z', as docs/contracts.md requires.
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def request_body(identifier):
    inp = {
        "type": "n",
        "identifier": identifier,
        "path": "4.2.3.3.6",
        "scanMetadata": {
            "timestamp": timestamp_now(),
            "geoLocation": {"latitude": 59.3293, "longitude": 18.0686, "accuracy": 8.0, "consent": True},
        },
    }
    body = {"query": DOCUMENT, "variables": {"input": inp}, "operationName": "ResolveIdentifier"}
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


class Worker(threading.Thread):
    def __init__(self, target, token, counter, total, start_barrier, timeout):
        super().__init__(daemon=True)
        self.target, self.token, self.counter, self.total = target, token, counter, total
        self.start_barrier, self.timeout = start_barrier, timeout
        self.failures = 0
        self.first_error = None
        self.conn = None
        rng = random.Random()
        # Distinct identifiers per request keep the load realistic (no single-identifier ordering).
        self.id_prefix = "".join(rng.choice(BASE58) for _ in range(14))

    def connect(self):
        cls = http.client.HTTPSConnection if self.target.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.target.hostname, self.target.port, timeout=self.timeout)
        conn.connect()
        # http.client sets TCP_NODELAY itself since 3.x; set it anyway so the baseline never
        # depends on that (Nagle + delayed ACK would cost ~40 ms per request).
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def run(self):
        path = self.target.path or "/"
        if self.target.query:
            path += "?" + self.target.query
        try:
            self.connect()  # Before the barrier: the timing measures requests, not connection setup.
        except OSError as e:
            self.first_error = f"connect: {e}"
        self.start_barrier.wait()
        while True:
            i = next(self.counter)  # itertools.count is atomic under the GIL.
            if i >= self.total:
                break
            headers = {
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.token}",
                "Idempotency-Key": str(uuid.uuid4()),
                "User-Agent": USER_AGENT,
            }
            try:
                if self.conn is None:
                    self.connect()
                # A bytes body goes out in the same send() as the headers (http.client does that).
                self.conn.request("POST", path, body=request_body(f"{self.id_prefix}{i}"), headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self.close()
                ok = False
                if resp.status == 200:
                    payload = json.loads(data)
                    ok = not payload.get("errors") and (payload.get("data") or {}).get("resolveIdentifier") is not None
                if not ok:
                    self.failures += 1
                    self.first_error = self.first_error or f"HTTP {resp.status}: {data[:200]!r}"
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.failures += 1
                self.first_error = self.first_error or f"{type(e).__name__}: {e}"
                self.close()  # Reconnect on the next request.
        self.close()


def main():
    ap = argparse.ArgumentParser(description="Baseline Python client for the plings-bridge API benchmark.")
    ap.add_argument("--url", required=True, help="the API URL, e.g. http://127.0.0.1:PORT/graphql")
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0, help="per-request socket timeout, seconds")
    args = ap.parse_args()
    if args.count < 0 or args.concurrency < 1:
        ap.error("--count must be >= 0 and --concurrency >= 1")
    target = urllib.parse.urlsplit(args.url)
    if target.scheme not in ("http", "https"):
        ap.error("--url must be http:// or https://")
    with open(args.token_file, encoding="utf-8") as f:
        token = f.read().strip()

    counter = itertools.count()
    barrier = threading.Barrier(args.concurrency + 1)
    workers = [Worker(target, token, counter, args.count, barrier, args.timeout) for _ in range(args.concurrency)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - start

    failures = sum(w.failures for w in workers)
    errors = [w.first_error for w in workers if w.first_error]
    if errors:
        sys.stderr.write(f"api_baseline_client: first error: {errors[0]}\n")
    print(json.dumps({
        "count": args.count,
        "concurrency": args.concurrency,
        "seconds": round(seconds, 4),
        "perSecond": round(args.count / seconds, 1) if seconds > 0 else None,
        "failures": failures,
    }, separators=(",", ":")), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
