#!/usr/bin/python3
"""Strict GraphQL stand-in of the Plings API, for plings-bridge integration tests and benchmarks.

Serves `POST /graphql` on loopback with a schema whose `ResolveIdentifierInput` is exactly the
input of docs/contracts.md ("resolveIdentifier input"), so unknown or mistyped fields are rejected the way the real API rejects them.
It checks the bearer token, records every request it receives, and can be told at runtime (under
`/_control/`) to fail in the ways the outcome table of docs/contracts.md ("Outcomes") distinguishes.

Usage: api_standin.py --port 0 --token-file PATH [--host 127.0.0.1] [--record-limit N] [-v]
Prints `READY port=<port>` on stdout once listening; everything else goes to stderr.
See README-api.md beside this file for the control API and the record format.
"""

import argparse
import collections
import datetime
import hmac
import ipaddress
import json
import os
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import traceback
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import graphql
    from graphql.utilities import get_operation_ast
except ImportError:  # Tell the operator how to fix it instead of a bare traceback.
    sys.stderr.write(
        "api_standin: graphql-core is missing; install it with\n"
        "  /usr/bin/python3 -m pip install --break-system-packages 'graphql-core>=3.2,<3.3'\n"
    )
    sys.exit(2)

SCHEMA_SDL = """
input GeoLocationInput { latitude: Float!, longitude: Float!, accuracy: Float, consent: Boolean! }
input ScanMetadataInput { timestamp: String!, geoLocation: GeoLocationInput }
input ResolveIdentifierInput {
  type: String!, identifier: String!, path: String!, classPointer: String, scanMetadata: ScanMetadataInput
}
type ResolveIdentifierResult { ok: Boolean!, identifier: String! }
type Query { health: Boolean! }
type Mutation { resolveIdentifier(input: ResolveIdentifierInput!): ResolveIdentifierResult }
"""

# RFC 3339 UTC with exactly three fractional digits and 'Z' (docs/contracts.md). ASCII so that \d does
# not accept other Unicode digits; fullmatch so that a trailing newline is not accepted.
TIMESTAMP_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)

MAX_BODY = 4 * 1024 * 1024  # Larger bodies get 413; a scan is well under 1 KiB.
DOCUMENT_CACHE_SIZE = 256  # Parsed+validated documents are reused; the bridge sends one document.

# Default error code per HTTP status for the status fault modes.
STATUS_CODES = {
    400: "BAD_REQUEST", 401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND",
    408: "REQUEST_TIMEOUT", 413: "PAYLOAD_TOO_LARGE", 422: "BAD_USER_INPUT",
    429: "TOO_MANY_REQUESTS", 500: "INTERNAL_SERVER_ERROR", 502: "BAD_GATEWAY",
    503: "SERVICE_UNAVAILABLE", 504: "GATEWAY_TIMEOUT",
}
# GraphQL-level fault modes: HTTP 200 with an `errors` entry of this code.
GQL_MODES = {
    "gql_error": ("INTERNAL_SERVER_ERROR", "internal error (injected)"),
    "gql_validation": ("BAD_USER_INPUT", "invalid input (injected)"),
    "gql_auth": ("UNAUTHENTICATED", "not authenticated (injected)"),
}
MODE_PARAMS = {"mode", "count", "failEveryNth", "delay", "retryAfter", "body", "reset", "location"}


def log(msg):
    sys.stderr.write(f"api_standin: {msg}\n")
    sys.stderr.flush()


def rfc3339(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def valid_timestamp(value):
    if not TIMESTAMP_RE.fullmatch(value):
        return False
    try:  # The regex accepts month 13 or hour 25; a real API would not.
        datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def gql_error(message, code, **extra):
    return {"message": message, "extensions": {"code": code, **extra}}


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def reject_constant(name):
    # Python's json accepts NaN/Infinity; JSON (and the real API) does not.
    raise ValueError(f"invalid JSON constant {name}")


# --------------------------------------------------------------------------------------------
# GraphQL


def resolve_identifier(_root, info, input):  # noqa: A002 - the argument is called `input`
    info.context["resolvedInput"] = input
    # Each field (one per scan; several under aliases in a batched request) with its input, in execution order.
    info.context.setdefault("fields", []).append((info.path.key, input))
    fault = info.context.get("fieldFault")
    if fault is not None:
        code = fault(input.get("identifier"))
        if code is not None:
            raise graphql.GraphQLError(f"field error (injected, {code})", extensions={"code": code})
    meta = input.get("scanMetadata")
    if meta is not None and not valid_timestamp(meta["timestamp"]):
        raise graphql.GraphQLError(
            "scanMetadata.timestamp must be RFC 3339 UTC with milliseconds and 'Z' "
            f"(like 2026-06-14T08:00:00.123Z), got {meta['timestamp']!r}",
            extensions={"code": "BAD_USER_INPUT", "field": "scanMetadata.timestamp"},
        )
    return {"ok": True, "identifier": input["identifier"]}


def build_schema():
    schema = graphql.build_schema(SCHEMA_SDL)
    schema.mutation_type.fields["resolveIdentifier"].resolve = resolve_identifier
    schema.query_type.fields["health"].resolve = lambda *_: True
    return schema


class GraphQLExecutor:
    """Parses, validates and executes documents; caches parse+validate per document text."""

    def __init__(self):
        self.schema = build_schema()
        self._cache = {}
        self._lock = threading.Lock()

    def _document(self, query):
        with self._lock:
            hit = self._cache.get(query)
        if hit is not None:
            return hit
        try:
            doc = graphql.parse(query)
            errors = graphql.validate(self.schema, doc)
            hit = (doc, [self._format(e, "GRAPHQL_VALIDATION_FAILED") for e in errors]) if errors else (doc, [])
        except graphql.GraphQLError as e:  # Syntax errors.
            hit = (None, [self._format(e, "GRAPHQL_PARSE_FAILED")])
        with self._lock:
            if len(self._cache) >= DOCUMENT_CACHE_SIZE:
                self._cache.clear()  # Crude, but only fuzzing makes it fill up.
            self._cache[query] = hit
        return hit

    @staticmethod
    def _format(err, default_code):
        out = err.formatted
        ext = dict(out.get("extensions") or {})
        ext.setdefault("code", default_code)
        out["extensions"] = ext
        return out

    def root_fields(self, query, operation_name):
        """The number of fields the operation selects at its root (aliases included), 0 if it does not parse."""
        doc, errors = self._document(query)
        if doc is None:
            return 0
        op = get_operation_ast(doc, operation_name)
        return len(op.selection_set.selections) if op is not None else 0

    def run(self, query, variables, operation_name, context):
        """Returns the response payload (always HTTP 200 at this point, like Apollo's GraphQL errors)."""
        doc, errors = self._document(query)
        if errors:
            return {"errors": errors}
        if get_operation_ast(doc, operation_name) is None:
            what = f"Unknown operation named '{operation_name}'." if operation_name else (
                "Must provide operation name if query contains multiple operations.")
            return {"errors": [gql_error(what, "OPERATION_RESOLUTION_FAILURE")]}
        result = graphql.execute_sync(
            self.schema, doc, variable_values=variables, operation_name=operation_name, context_value=context
        )
        payload = {}
        if result.errors:
            # No data at all means execution never started: the variables failed to coerce
            # against the schema (unknown field, wrong type, missing required field).
            code = "BAD_USER_INPUT" if result.data is None else "INTERNAL_SERVER_ERROR"
            payload["errors"] = [self._format(e, code) for e in result.errors]
        if result.data is not None:
            payload["data"] = result.data
        return payload


# --------------------------------------------------------------------------------------------
# Shared state: fault mode, records, statistics


class ModeError(ValueError):
    pass


def parse_mode(spec):
    """Validates a `POST /_control/mode` body and returns the normalised mode dict."""
    if not isinstance(spec, dict):
        raise ModeError("body must be a JSON object")
    unknown = set(spec) - MODE_PARAMS
    if unknown:  # Strict, so that a typo in a test does not silently leave the stand-in in `ok`.
        raise ModeError(f"unknown parameter(s): {sorted(unknown)}; allowed: {sorted(MODE_PARAMS)}")
    name = spec.get("mode")
    if isinstance(name, int) and not isinstance(name, bool):
        name = str(name)
    if not isinstance(name, str):
        raise ModeError("`mode` is required")
    is_status = name.isdigit() and 300 <= int(name) <= 599
    if not (is_status or name in ("ok", "slow", "drop") or name in GQL_MODES):
        raise ModeError(f"unknown mode {name!r}; use ok, slow, drop, gql_error, gql_validation, gql_auth, "
                        "or an HTTP status 300-599 (e.g. 302, 500, 503, 429, 401, 403, 400, 422)")

    def positive_int(key):
        v = spec.get(key)
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ModeError(f"`{key}` must be a positive integer")
        return v

    def seconds(key):
        v = spec.get(key)
        if v is None:
            return None
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise ModeError(f"`{key}` must be a non-negative number of seconds")
        return v

    mode = {
        "mode": name,
        "count": positive_int("count"),
        "failEveryNth": positive_int("failEveryNth"),
        "delay": seconds("delay"),
        "retryAfter": None,
        "body": None,
        "reset": bool(spec.get("reset", False)),
        "location": None,
    }
    if name == "slow" and mode["delay"] is None:
        mode["delay"] = 1.0
    ra = spec.get("retryAfter")
    if ra is not None:
        if isinstance(ra, str):
            mode["retryAfter"] = ra  # An HTTP-date, sent verbatim.
        else:
            secs = seconds("retryAfter")
            mode["retryAfter"] = str(int(secs)) if float(secs).is_integer() else str(secs)
        if not is_status:
            raise ModeError("`retryAfter` only applies to HTTP status modes (429, 503, ...)")
    if spec.get("body") is not None:
        if not isinstance(spec["body"], str) or not is_status:
            raise ModeError("`body` must be a string and only applies to HTTP status modes")
        mode["body"] = spec["body"]
    if "reset" in spec and (not isinstance(spec["reset"], bool) or name != "drop"):
        raise ModeError("`reset` must be a boolean and only applies to mode drop")
    if spec.get("location") is not None:
        if not isinstance(spec["location"], str) or not (is_status and int(name) < 400):
            raise ModeError("`location` must be a string and only applies to redirect modes (300-399)")
        mode["location"] = spec["location"]
    return mode


OK_MODE = {"mode": "ok", "count": None, "failEveryNth": None, "delay": None, "retryAfter": None,
           "body": None, "reset": False, "location": None}


class State:
    """Everything shared between handler threads, behind one condition variable."""

    def __init__(self, record_limit):
        self.cond = threading.Condition()
        self.record_limit = record_limit
        self.client_timeout = None  # --client-timeout
        self.order_tolerance = 0.0  # --order-tolerance
        self.max_aliases = None  # POST /_control/limits
        self.field_faults = {}  # identifier -> [code, remaining or None]; POST /_control/field-fault
        self._clear()

    def _clear(self):
        self.generation = getattr(self, "generation", 0) + 1  # Requests in flight across a reset are ignored.
        self.seq = 0
        self.records = collections.deque(maxlen=self.record_limit)
        self.evicted = 0
        self.mode = dict(OK_MODE)
        self.mode_seen = 0  # Requests since the mode was set, for failEveryNth.
        self.by_status = collections.Counter()
        self.by_mode = collections.Counter()
        self.by_code = collections.Counter()
        self.delivered = 0
        self.keys = set()
        self.delivered_keys = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.in_flight_ids = collections.Counter()
        self.identifier_overlaps = 0
        self.last_delivered_ts = {}
        self.order_violations = 0
        self.order_violation_seqs = []
        self.abandoned_answers = 0
        self.api_connections = 0
        self.batched_requests = 0
        self.largest_batch = 0

    def reset(self):
        with self.cond:
            self._clear()
            self.max_aliases = None
            self.field_faults = {}
            self.cond.notify_all()

    def field_fault(self, identifier):
        """The error code the field of `identifier` gets now, or None (and one use of a counted fault spent)."""
        with self.cond:
            fault = self.field_faults.get(identifier)
            if fault is None:
                return None
            code, remaining = fault
            if remaining is not None:
                if remaining <= 1:
                    del self.field_faults[identifier]
                else:
                    fault[1] = remaining - 1
            return code

    def set_mode(self, mode):
        with self.cond:
            self.mode = mode
            self.mode_seen = 0
            return self.mode_public()

    def mode_public(self):
        return {k: v for k, v in self.mode.items() if v is not None and not (k == "reset" and not v)}

    def arrive(self, record, identifiers, new_connection, faultable):
        """Numbers the request, decides which mode applies to it, and stores its record.

        Only `POST /graphql` is `faultable`: a request to a wrong path must not use up `count`."""
        with self.cond:
            self.seq += 1
            record["seq"] = self.seq
            configured = self.mode
            applied = OK_MODE
            if configured["mode"] != "ok" and faultable:
                self.mode_seen += 1
                every = configured["failEveryNth"]
                if every is None or self.mode_seen % every == 0:
                    applied = configured
                    if configured["count"] is not None:
                        configured["count"] -= 1
                        if configured["count"] == 0:  # Used up: back to normal answers.
                            self.mode = dict(OK_MODE)
                            self.mode_seen = 0
            record["modeSet"] = configured["mode"]
            record["mode"] = applied["mode"]
            if len(self.records) == self.records.maxlen:
                self.evicted += 1
            self.records.append(record)
            if new_connection:
                self.api_connections += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            for identifier in identifiers:
                if self.in_flight_ids[identifier] > 0:
                    self.identifier_overlaps += 1  # docs/contracts.md, "Delivery order": never two scans of one identifier in flight.
                self.in_flight_ids[identifier] += 1
            key = record["headers"].get("idempotency-key")
            if key is not None:
                self.keys.add(key)
            self.cond.notify_all()
            return self.generation, dict(applied)

    def finish(self, generation, record, identifiers, status, response, dropped=False):
        # A field is delivered when it has a non-null result and no error names it; a request-level error
        # (no path) spoils every field. A single request's one field is `resolveIdentifier`.
        fields = record.get("fields") or []
        delivered_fields = []
        if status == 200 and isinstance(response, dict) and isinstance(response.get("data"), dict):
            errors = response.get("errors") or []
            errored = {e["path"][0] for e in errors if isinstance(e, dict) and e.get("path")}
            request_error = any(isinstance(e, dict) and not e.get("path") for e in errors)
            for alias, inp in fields:
                if not request_error and alias not in errored and response["data"].get(alias) is not None:
                    delivered_fields.append((alias, inp))
        delivered = bool(fields) and len(delivered_fields) == len(fields)
        with self.cond:
            record["status"] = status
            record["response"] = response
            record["delivered"] = delivered
            record["deliveredFields"] = len(delivered_fields)
            record["deliveredAliases"] = [alias for alias, _ in delivered_fields]
            # Per scan: its input as sent (the k-th variable is the k-th field's), and whether it was delivered.
            raw = record.get("inputs") or []
            names = {alias for alias, _ in delivered_fields}
            record["scans"] = [
                {"alias": alias, "input": raw[k] if len(raw) == len(fields) else value, "delivered": alias in names}
                for k, (alias, value) in enumerate(fields)
            ] if fields else [{"alias": None, "input": value, "delivered": False} for value in raw]
            record["answeredMono"] = time.monotonic()
            record["state"] = "dropped" if dropped else "answered"
            if generation != self.generation:
                return
            self.by_status["dropped" if dropped else str(status)] += 1
            self.by_mode[record["mode"]] += 1
            if isinstance(response, dict):
                for err in response.get("errors") or []:
                    code = (err.get("extensions") or {}).get("code") if isinstance(err, dict) else None
                    self.by_code[code or "NONE"] += 1
            self.in_flight -= 1
            for identifier in identifiers:
                self.in_flight_ids[identifier] -= 1
                if self.in_flight_ids[identifier] <= 0:
                    del self.in_flight_ids[identifier]
            if len(fields) > 1:
                self.batched_requests += 1
                self.largest_batch = max(self.largest_batch, len(fields))
            key = record["headers"].get("idempotency-key")
            # An answer later than the client's own timeout went to nobody: the client had given up, counted
            # the attempt as failed and kept its scan pending (the same key comes again). Its late "delivered"
            # says nothing about the order the client delivers in, so it is counted, not order-checked.
            late = self.client_timeout is not None and \
                record["answeredMono"] - record["arrivedMono"] > self.client_timeout
            for alias, inp in delivered_fields:
                self.delivered += 1
                if key is not None:
                    self.delivered_keys.add(key if len(fields) == 1 else f"{key}#{alias}")
                if late:
                    self.abandoned_answers += 1
                else:
                    self._check_order(record, inp)
            self.cond.notify_all()

    @staticmethod
    def _seconds(timestamp):
        try:
            return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return float("inf")  # not a timestamp: always compared strictly

    def _check_order(self, record, inp):
        # docs/contracts.md, "Delivery order": per identifier, capture order; a delivered scan must not be older than one
        # already delivered (an equal timestamp is a legitimate at-least-once resend).
        identifier = inp.get("identifier") if isinstance(inp, dict) else None
        identifier = identifier if isinstance(identifier, str) else None
        meta = inp.get("scanMetadata") if isinstance(inp, dict) else None
        ts = meta.get("timestamp") if isinstance(meta, dict) else None
        if identifier is None or not isinstance(ts, str):
            return
        last = self.last_delivered_ts.get(identifier)
        if last is not None and ts < last and self._seconds(last) - self._seconds(ts) > self.order_tolerance:
            self.order_violations += 1
            if len(self.order_violation_seqs) < 100:
                self.order_violation_seqs.append(record["seq"])
        else:
            self.last_delivered_ts[identifier] = ts

    def requests_since(self, since, limit, wait, minimum):
        deadline = time.monotonic() + wait
        with self.cond:
            while True:
                # Records are appended in seq order, so walk back from the newest.
                picked = []
                for rec in reversed(self.records):
                    if rec["seq"] <= since:
                        break
                    picked.append(rec)
                picked.reverse()
                done = sum(1 for r in picked if r["state"] != "pending")
                remaining = deadline - time.monotonic()
                if done >= minimum or remaining <= 0:
                    break
                self.cond.wait(remaining)
            if limit is not None:
                picked = picked[:limit]
            # Copy under the lock: a pending record is still updated by its handler thread.
            return {"requests": [dict(r) for r in picked], "lastSeq": self.seq, "evicted": self.evicted}

    def stats(self):
        with self.cond:
            return {
                "total": self.seq,
                "byStatus": dict(self.by_status),
                "byMode": dict(self.by_mode),
                "byErrorCode": dict(self.by_code),
                "delivered": self.delivered,
                "distinctIdempotencyKeys": len(self.keys),
                "distinctDeliveredKeys": len(self.delivered_keys),
                "duplicateDeliveries": self.delivered - len(self.delivered_keys),
                "inFlight": self.in_flight,
                "maxInFlight": self.max_in_flight,
                "identifierOverlaps": self.identifier_overlaps,
                "orderViolations": self.order_violations,
                "abandonedAnswers": self.abandoned_answers,
                "orderViolationSeqs": list(self.order_violation_seqs),
                "apiConnections": self.api_connections,
                "batchedRequests": self.batched_requests,
                "largestBatch": self.largest_batch,
                "limits": {"maxAliases": self.max_aliases},
                "recordsHeld": len(self.records),
                "recordsEvicted": self.evicted,
                "lastSeq": self.seq,
                "mode": self.mode_public(),
            }


# --------------------------------------------------------------------------------------------
# Token


class TokenFile:
    """The bearer token: the file's content, stripped. Re-read when the file changes, so tests can
    rotate the token while the stand-in runs."""

    def __init__(self, path):
        self.path = path
        self._stamp = None
        self._token = None
        self._lock = threading.Lock()
        self.get()
        if self._token is None:
            raise SystemExit(f"api_standin: cannot read token file {path}")

    def get(self):
        with self._lock:
            try:
                st = os.stat(self.path)
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                if stamp != self._stamp:
                    with open(self.path, "rb") as f:
                        self._token = f.read().decode("utf-8", "replace").strip()
                    self._stamp = stamp
            except OSError as e:
                if self._token is not None:
                    log(f"token file unreadable ({e}); keeping the last token")
            return self._token


# --------------------------------------------------------------------------------------------
# HTTP


class RequestError(Exception):
    """A request we answer with an HTTP error before GraphQL sees it."""

    def __init__(self, status, message, code, close=False):
        super().__init__(message)
        self.status, self.message, self.code, self.close = status, message, code, close


class ClientGone(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # Keep-alive; every answer carries Content-Length.
    disable_nagle_algorithm = True  # TCP_NODELAY, else delayed ACK costs ~44 ms per request.
    server_version = "plings-api-standin/1"

    def version_string(self):
        return self.server_version  # Without the default " Python/3.x" suffix.

    # Set on the class by main().
    state: State = None
    executor: GraphQLExecutor = None
    token: TokenFile = None
    verbose = False
    _conn_ids = iter(range(1, 1 << 62))  # next() on a range iterator is atomic under the GIL.

    def setup(self):
        super().setup()
        self.conn_id = next(Handler._conn_ids)
        self.conn_requests = 0

    def log_message(self, fmt, *args):
        if self.verbose:
            log(f"{self.address_string()}:{self.client_address[1]} {fmt % args}")

    # -- plumbing ---------------------------------------------------------------------------

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if te == "chunked":
            return self._read_chunked()
        if te:
            raise RequestError(501, f"unsupported Transfer-Encoding {te!r}", "BAD_REQUEST", close=True)
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except ValueError:
            raise RequestError(400, "invalid Content-Length", "BAD_REQUEST", close=True)
        if n > MAX_BODY:  # Cannot stay in sync without reading it, so close afterwards.
            raise RequestError(413, f"body larger than {MAX_BODY} bytes", "PAYLOAD_TOO_LARGE", close=True)
        data = self.rfile.read(n)
        if len(data) < n:
            raise ClientGone()
        return data

    def _read_chunked(self):
        chunks, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            if not line:
                raise ClientGone()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise RequestError(400, "bad chunk size", "BAD_REQUEST", close=True)
            if size == 0:
                while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass  # Trailers, ignored.
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise RequestError(413, f"body larger than {MAX_BODY} bytes", "PAYLOAD_TOO_LARGE", close=True)
            chunk = self.rfile.read(size)
            self.rfile.readline(8)
            if len(chunk) < size:
                raise ClientGone()
            chunks.append(chunk)

    def _send(self, status, payload=None, raw=None, content_type="application/json", headers=(), close=False):
        body = dumps(payload) if raw is None else raw
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            if close:
                self.send_header("Connection", "close")  # Also sets self.close_connection.
            # Headers and body in one send(), so no small trailing segment waits on an ACK.
            self._headers_buffer.append(b"\r\n")
            if self.command != "HEAD":  # A body after HEAD would desynchronise a keep-alive connection.
                self._headers_buffer.append(body)
            self.flush_headers()
        except OSError:
            self.close_connection = True

    def _drop(self, reset):
        """Closes the connection without an answer: FIN, or with `reset` an RST."""
        self.close_connection = True
        try:
            if reset:
                # SO_LINGER 0 makes close() send RST. Close here, because socketserver would
                # otherwise shutdown(SHUT_WR) first, which sends a FIN. rfile (a makefile) holds a
                # reference to the socket, so it must go first for close() to be real; wfile does
                # not, and http.server still flushes it after this handler returns.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.rfile.close()
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _json_body(self, raw):
        return json.loads(raw.decode("utf-8"), parse_constant=reject_constant)

    # -- dispatch ---------------------------------------------------------------------------

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()

    def do_PATCH(self):
        self._dispatch()

    def do_HEAD(self):
        self._dispatch()

    def do_OPTIONS(self):
        self._dispatch()

    def _dispatch(self):
        try:
            if urllib.parse.urlsplit(self.path).path.startswith("/_control/"):
                self._control()
            else:
                self._api()
        except ClientGone:
            self.close_connection = True
        except Exception:  # Never let bad input kill the connection thread without an answer.
            log("internal error:\n" + traceback.format_exc())
            self._send(500, {"errors": [gql_error("stand-in internal error", "INTERNAL_SERVER_ERROR")]}, close=True)

    # -- the API ----------------------------------------------------------------------------

    def _api(self):
        arrived_mono, arrived_wall = time.monotonic(), time.time()
        self.conn_requests += 1
        read_error, raw = None, b""
        try:
            raw = self._read_body()
        except RequestError as e:
            read_error = e
        body, json_error = None, None
        if read_error is None and raw:
            try:
                body = self._json_body(raw)
            except (ValueError, UnicodeDecodeError) as e:
                json_error = str(e)
        variables = body.get("variables") if isinstance(body, dict) else None
        inp = variables.get("input") if isinstance(variables, dict) else None
        # A batched request (docs/contracts.md, "Batched request") carries one input per variable $i0, $i1, ...
        if isinstance(inp, dict):
            inputs = [inp]
        elif isinstance(variables, dict):
            inputs = [v for v in variables.values() if isinstance(v, dict) and "identifier" in v]
        else:
            inputs = []
        identifiers = [i.get("identifier") for i in inputs if isinstance(i.get("identifier"), str)]
        record = {
            "seq": None,
            "conn": self.conn_id,
            "connRequest": self.conn_requests,
            "client": f"{self.client_address[0]}:{self.client_address[1]}",
            "arrivedMono": arrived_mono,
            "arrivedWall": arrived_wall,
            "arrivedAt": rfc3339(arrived_wall),
            "answeredMono": None,
            "method": self.command,
            "path": self.path,
            "httpVersion": self.request_version,
            "headers": self._header_dict(),
            "rawHeaders": [[k, v] for k, v in self.headers.items()],
            "body": body,
            "rawBody": None if body is not None else raw.decode("utf-8", "replace"),
            "input": inp,
            "inputs": inputs,
            "fields": [],
            "deliveredFields": 0,
            "scans": [],
            "status": None,
            "state": "pending",
            "delivered": False,
            "mode": None,
            "modeSet": None,
            "response": None,
        }
        faultable = self.command == "POST" and urllib.parse.urlsplit(self.path).path == "/graphql"
        generation, mode = self.state.arrive(record, identifiers, self.conn_requests == 1, faultable)
        status, response = None, None
        try:
            status, response, headers, raw_out, close = self._answer(mode, read_error, body, json_error, record)
        except Exception:
            log("internal error:\n" + traceback.format_exc())
            status, headers, raw_out, close = 500, (), None, True
            response = {"errors": [gql_error("stand-in internal error", "INTERNAL_SERVER_ERROR")]}
        finally:
            dropped = status is None
            self.state.finish(generation, record, identifiers, status, response, dropped=dropped)
        if dropped:
            self._drop(mode.get("reset", False))
        elif raw_out is not None:
            ctype = "text/html" if raw_out.lstrip().startswith(b"<") else "text/plain"
            self._send(status, raw=raw_out, content_type=ctype + "; charset=utf-8", headers=headers, close=close)
        else:
            self._send(status, response, headers=headers, close=close)
        if self.verbose:
            log(f"#{record['seq']} {self.command} {self.path} mode={record['mode']} -> "
                f"{'dropped' if dropped else status}")

    def _header_dict(self):
        # Lower-cased names (HTTP names are case-insensitive); repeated headers joined with ", ".
        out = {}
        for k, v in self.headers.items():
            k = k.lower()
            out[k] = f"{out[k]}, {v}" if k in out else v
        return out

    def _answer(self, mode, read_error, body, json_error, record):
        """Returns (status or None to drop, response JSON, extra headers, raw body or None, close)."""
        if read_error is not None:
            return read_error.status, {"errors": [gql_error(read_error.message, read_error.code)]}, (), None, True
        path = urllib.parse.urlsplit(self.path).path
        if path != "/graphql":
            return 404, {"errors": [gql_error(f"no route for {path}; the API is POST /graphql", "NOT_FOUND")]}, \
                (), None, False
        if self.command != "POST":
            return 405, {"errors": [gql_error("use POST", "METHOD_NOT_ALLOWED")]}, (("Allow", "POST"),), None, False

        # Fault injection comes first: a broken server or proxy answers before auth is checked.
        if mode["delay"]:
            time.sleep(mode["delay"])
        name = mode["mode"]
        if name == "drop":
            return None, None, (), None, True
        if name.isdigit():
            status = int(name)
            headers = (("Retry-After", mode["retryAfter"]),) if mode["retryAfter"] is not None else ()
            if mode.get("location") is not None:
                headers += (("Location", mode["location"]),)
            if mode["body"] is not None:
                return status, None, headers, mode["body"].encode("utf-8"), False
            try:
                phrase = HTTPStatus(status).phrase.lower()
            except ValueError:
                phrase = "error"
            message = "unauthorized" if status == 401 else f"{phrase} (injected)"
            return status, {"errors": [gql_error(message, STATUS_CODES.get(status, f"HTTP_{status}"))]}, \
                headers, None, False
        if name in GQL_MODES:
            code, message = GQL_MODES[name]
            response = {"errors": [gql_error(message, code)]}
            if name != "gql_validation":  # A variables error never reaches execution, so it has no data.
                response["data"] = {"resolveIdentifier": None}
                response["errors"][0]["path"] = ["resolveIdentifier"]
            return 200, response, (), None, False

        # Normal processing ("ok", or "slow" after its delay).
        token = self.token.get()
        auth = self.headers.get("Authorization") or ""
        scheme, _, presented = auth.partition(" ")
        if not (token and scheme.lower() == "bearer" and hmac.compare_digest(presented.encode(), token.encode())):
            return 401, {"errors": [gql_error("unauthorized", "UNAUTHENTICATED")]}, (), None, False
        ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return 400, {"errors": [gql_error(
                f"Content-Type must be application/json, got {ctype or 'none'!r}", "BAD_REQUEST")]}, (), None, False
        if json_error is not None or body is None:
            why = json_error or "empty body"
            return 400, {"errors": [gql_error(f"body is not valid JSON: {why}", "BAD_REQUEST")]}, (), None, False
        if not isinstance(body, dict):
            return 400, {"errors": [gql_error("body must be a JSON object", "BAD_REQUEST")]}, (), None, False
        query, variables, op = body.get("query"), body.get("variables"), body.get("operationName")
        if not isinstance(query, str) or not query.strip():
            return 400, {"errors": [gql_error("`query` must be a non-empty string", "BAD_REQUEST")]}, (), None, False
        if variables is not None and not isinstance(variables, dict):
            return 400, {"errors": [gql_error("`variables` must be an object", "BAD_REQUEST")]}, (), None, False
        if op is not None and not isinstance(op, str):
            return 400, {"errors": [gql_error("`operationName` must be a string", "BAD_REQUEST")]}, (), None, False
        limit = self.state.max_aliases
        if limit is not None:
            roots = self.executor.root_fields(query, op)
            if roots > limit:  # As an alias-limiting plugin does, refused before execution (Apollo 4: HTTP 400).
                return 400, {"errors": [gql_error(
                    f"aliases limit exceeded: {roots} root fields, at most {limit} allowed",
                    "GRAPHQL_VALIDATION_FAILED")]}, (), None, False
        context = {"fieldFault": self.state.field_fault}
        response = self.executor.run(query, variables, op, context)
        if record["input"] is None and "resolvedInput" in context and len(context.get("fields", [])) == 1:
            record["input"] = context["resolvedInput"]  # The input was a literal in the document.
        record["fields"] = [[alias, value] for alias, value in context.get("fields", [])]
        return 200, response, (), None, False

    # -- control API ------------------------------------------------------------------------

    def _control(self):
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        try:
            raw = self._read_body()
        except RequestError as e:
            return self._send(e.status, {"error": e.message}, close=True)
        route = (self.command, url.path)
        try:
            if route == ("POST", "/_control/mode"):
                spec = self._json_body(raw) if raw else None
                result = self.state.set_mode(parse_mode(spec))
                log(f"mode set: {json.dumps(result)}")
                return self._send(200, result)
            if route == ("GET", "/_control/mode"):
                with self.state.cond:
                    return self._send(200, self.state.mode_public())
            if route == ("GET", "/_control/requests"):
                def num(key, default, cast=int):
                    return cast(params[key][0]) if key in params else default
                since, limit = num("since", 0), num("limit", None)
                wait, minimum = min(num("wait", 0.0, float), 60.0), num("min", 1)
                return self._send(200, self.state.requests_since(since, limit, wait, minimum))
            if route == ("POST", "/_control/limits"):
                spec = self._json_body(raw) if raw else {}
                value = spec.get("maxAliases") if isinstance(spec, dict) else None
                if set(spec) - {"maxAliases"} or not (value is None or (isinstance(value, int) and value >= 1)):
                    raise ValueError("body: {\"maxAliases\": N >= 1 or null}")
                with self.state.cond:
                    self.state.max_aliases = value
                log(f"limits: maxAliases={value}")
                return self._send(200, {"maxAliases": value})
            if route == ("POST", "/_control/field-fault"):
                spec = self._json_body(raw) if raw else {}
                if not isinstance(spec, dict) or set(spec) - {"identifier", "code", "count"} \
                        or not isinstance(spec.get("identifier"), str) or not isinstance(spec.get("code"), str):
                    raise ValueError('body: {"identifier": S, "code": C[, "count": N]}')
                count = spec.get("count")
                if count is not None and (not isinstance(count, int) or count < 1):
                    raise ValueError("`count` must be a positive integer")
                with self.state.cond:
                    self.state.field_faults[spec["identifier"]] = [spec["code"], count]
                log(f"field fault: {json.dumps(spec)}")
                return self._send(200, spec)
            if route == ("GET", "/_control/stats"):
                return self._send(200, self.state.stats())
            if route == ("POST", "/_control/reset"):
                self.state.reset()
                log("reset: records, statistics and mode cleared")
                return self._send(200, {"ok": True})
        except (ValueError, UnicodeDecodeError) as e:  # ModeError, bad JSON, bad query numbers.
            return self._send(400, {"error": str(e)})
        self._send(404, {"error": f"no control route {self.command} {url.path}; see README-api.md"})


class Server(ThreadingHTTPServer):
    daemon_threads = True  # Idle keep-alive connections must not keep the process alive.
    block_on_close = False  # Do not join connection threads (possibly idle keep-alives) on close.
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description="Strict GraphQL stand-in of the Plings API (loopback only).")
    ap.add_argument("--port", type=int, required=True, help="TCP port, 0 for any free port")
    ap.add_argument("--token-file", required=True, help="file holding the bearer token (stripped)")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    ap.add_argument("--record-limit", type=int, default=1_000_000, help="requests kept in memory (oldest evicted)")
    ap.add_argument("--client-timeout", type=float, default=None,
                    help="the client's request timeout: answers later than this are not order-checked")
    ap.add_argument("--order-tolerance", type=float, default=0.0,
                    help="seconds by which a delivered scan may be older than the last one of its identifier "
                         "(reads of different devices, docs/contracts.md 'Delivery order'); default 0: strict")
    ap.add_argument("--tls-cert", help="PEM certificate (chain): HTTPS instead of HTTP, as the real API (the gate box)")
    ap.add_argument("--tls-key", help="PEM key of --tls-cert")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every request to stderr")
    args = ap.parse_args()

    try:
        addr = ipaddress.ip_address(args.host)
    except ValueError:
        ap.error("--host must be a literal loopback address")
    if not addr.is_loopback:  # A test rig with a known token must never listen beyond this machine.
        ap.error("--host must be a loopback address (127.0.0.0/8 or ::1)")
    if args.record_limit < 0:
        ap.error("--record-limit must be >= 0")

    Handler.state = State(args.record_limit)
    Handler.state.client_timeout = args.client_timeout
    Handler.state.order_tolerance = args.order_tolerance
    Handler.executor = GraphQLExecutor()
    Handler.token = TokenFile(args.token_file)
    Handler.verbose = args.verbose
    Server.address_family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
    server = Server((args.host, args.port), Handler)
    port = server.server_address[1]
    scheme = "http"
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # serve_forever runs in a thread because shutdown() deadlocks if called from its own thread.
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    sys.stdout.write(f"READY port={port}\n")
    sys.stdout.flush()
    log(f"listening on {scheme}://{args.host}:{port}/graphql (control under /_control/), pid {os.getpid()}")
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    log("stopped")


if __name__ == "__main__":
    main()
