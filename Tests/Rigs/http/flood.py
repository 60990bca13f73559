#!/usr/bin/env python3
"""The local interface under abuse (issue 42): idle sockets, event streams of which some never read, headers sent a
byte a second, all at once against a running bridge, while scans are committed and /healthz and the bench page's
resources are asked for as a person's browser would. Plain sockets and one epoll loop (no library).

    flood.py PORT PID --scan-command JSON [--idle 2000] [--streams 200] [--stalled 50] [--slow 100]
             [--seconds 80] [--code-bytes 1500] [--probe-timeout 1]

PID is the bridge's process (its threads and RSS are read from /proc). --scan-command is the command that commits
one read, as a JSON list in which "{code}" stands for the code; it runs every 100 ms, 20 times before the flood
(quiet) and throughout it (flooded). Prints one JSON object with what was seen:

  probes / probesOK      /healthz answered 200 within the probe timeout (a fresh connection each)
  pageOK / pageTries     /, /app.js, /app.css, /status, /scans?newest=100 each answered 200 within it
  slowClosedAfter        seconds from connecting to the server closing it, per one-byte-a-second header client
  stalledClosedAfter     seconds from the end of the stalled streams' first 10 s to their being closed (null: never)
  readingStreamsOpen     reading streams still open at the end (none is ever cut)
  leftFreedAfter         seconds from a stream's client closing to the server's socket leaving CLOSE_WAIT
  threadsBefore/Peak, rssKiBBefore/Peak   the bridge's /proc/PID/status figures, before and during the flood
  scanQuietMs / scanFloodedMs   median duration of the scan command, quiet and flooded
  idleOpened             idle connections opened in all (the server closes them; they are opened again)
"""

import argparse
import errno
import json
import resource
import selectors
import socket
import statistics
import struct
import subprocess
import threading
import time

now = time.monotonic


def proc_status(pid):
    figures = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS"):
                figures[key] = int(value.split()[0])
    return figures


def tcp_state(sock):
    """The kernel's TCP state of a socket (1 ESTABLISHED, 7 CLOSE, 8 CLOSE_WAIT...)."""
    try:
        return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]
    except OSError:
        return 7


def server_side_states(port, peer_port):
    """The states of the server's sockets for the connection from `peer_port` (from /proc/net/tcp)."""
    states = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, state = fields[1], fields[2], int(fields[3], 16)
            if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == peer_port:
                states.append(state)
    return states


def get(port, path, timeout=1.0):
    """One request on a fresh connection; the status, or None when no whole answer came within `timeout`."""
    deadline = now() + timeout
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            sock.settimeout(max(0.01, deadline - now()))
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        sock.close()
        if now() > deadline:
            return None
        return int(data.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return None


class Scans(threading.Thread):
    """Commits a read every 100 ms with the scan command, timing each."""

    def __init__(self, command, code_bytes):
        super().__init__(daemon=True)
        self.command, self.code_bytes = command, code_bytes
        self.durations, self.running, self.count = [], True, 0

    def one(self):
        self.count += 1
        code = f"flood-{self.count:06d}-" + "x" * self.code_bytes
        start = now()
        subprocess.run([part.replace("{code}", code) for part in self.command], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return now() - start

    def run(self):
        while self.running:
            started = now()
            self.durations.append(self.one())
            time.sleep(max(0, 0.1 - (now() - started)))


def slow_only(port, count):
    """`count` headers sent a byte a second and `count` connections that send nothing, with nothing else going on:
    seconds from connecting to the server closing each (None: still open after 20 s)."""
    selector = selectors.DefaultSelector()
    opened = {}
    for kind in ("slow", "idle"):
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setblocking(False)
            if kind == "slow":
                sock.send(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
            opened[sock] = (kind, now())
            selector.register(sock, selectors.EVENT_READ)
    closed = {"slow": [], "idle": []}
    end, next_byte = now() + 20, now() + 1
    while opened and now() < end:
        for key, _ in selector.select(timeout=0.1):
            sock = key.fileobj
            try:
                if sock.recv(4096):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            kind, at = opened.pop(sock)
            closed[kind].append(round(now() - at, 2))
            selector.unregister(sock)
            sock.close()
        if now() >= next_byte:
            next_byte += 1
            for sock, (kind, _) in opened.items():
                if kind == "slow":
                    try:
                        sock.send(b"a")
                    except OSError:
                        pass
    for sock, (kind, _) in opened.items():
        closed[kind].append(None)
    return {"slowClosedAfter": closed["slow"], "idleClosedAfter": closed["idle"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("pid", type=int)
    parser.add_argument("--scan-command", required=True)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--stalled", type=int, default=50)
    parser.add_argument("--slow", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=80)
    parser.add_argument("--probe-timeout", type=float, default=1)
    parser.add_argument("--code-bytes", type=int, default=1500)
    parser.add_argument("--only-slow", action="store_true",
                        help="only the one-byte-a-second headers and as many idle connections, nothing else: "
                             "what the request deadline alone does (prints slowClosedAfter, idleClosedAfter)")
    args = parser.parse_args()
    if args.only_slow:
        print(json.dumps(slow_only(args.port, args.slow)))
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port, host = args.port, ("127.0.0.1", args.port)
    request_head = f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    result = {}

    scans = Scans(json.loads(args.scan_command), args.code_bytes)
    quiet = []
    for _ in range(20):
        started = now()
        quiet.append(scans.one())
        time.sleep(max(0, 0.1 - (now() - started)))
    before = proc_status(args.pid)
    result["threadsBefore"], result["rssKiBBefore"] = before["Threads"], before["VmRSS"]

    selector = selectors.DefaultSelector()
    # Stalled streams: a tiny receive buffer, never read. The server's buffers fill within their first 10 s
    # (the scans' events are big); the 60 s of not reading count from then at the latest.
    stalled = []
    for _ in range(args.stalled):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(host)
        sock.sendall(request_head)
        stalled.append(sock)
    stalled_full_at = now() + 10
    reading = []
    for _ in range(args.streams - args.stalled):
        sock = socket.create_connection(host)
        sock.sendall(request_head)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, ("stream", None))
        reading.append(sock)
    scans.start()
    flood_started = now()

    slow_open = {}
    for _ in range(args.slow):
        sock = socket.create_connection(host)
        sock.setblocking(False)
        sock.send(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
        slow_open[sock] = now()
        selector.register(sock, selectors.EVENT_READ, ("slow", None))
    slow_closed = []

    idle = set()
    result["idleOpened"] = 0

    def open_idle(limit):
        opened = 0
        while len(idle) < args.idle and opened < limit:
            sock = socket.socket()
            sock.setblocking(False)
            err = sock.connect_ex(host)
            if err not in (0, errno.EINPROGRESS):
                sock.close()
                break
            selector.register(sock, selectors.EVENT_READ, ("idle", None))
            idle.add(sock)
            opened += 1
        result["idleOpened"] += opened

    peak = dict(before)
    probes, probes_ok, page_ok, page_tries = 0, 0, 0, 0
    left_freed = []
    next_probe = flood_started + 3
    next_byte = now() + 1
    end = flood_started + args.seconds
    stalled_closed = {}
    idle_budget, idle_budget_at = 0.0, now()
    while now() < end:
        # Idle connections come back at most 400 a second (one host's flood: more only churns the limit faster).
        idle_budget = min(400.0, idle_budget + (now() - idle_budget_at) * 400)
        idle_budget_at = now()
        opened_before = result["idleOpened"]
        open_idle(int(idle_budget))
        idle_budget -= result["idleOpened"] - opened_before
        for key, _ in selector.select(timeout=0.1):
            sock, (kind, _) = key.fileobj, key.data
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                continue
            selector.unregister(sock)
            if kind == "slow":
                slow_closed.append(now() - slow_open.pop(sock))
            elif kind == "idle":
                idle.discard(sock)
            elif kind == "stream":
                reading.remove(sock)
            sock.close()
        t = now()
        if t >= next_byte:
            next_byte += 1
            for sock in list(slow_open):
                try:
                    sock.send(b"a")
                except OSError:
                    pass
        for sock in stalled:
            if sock not in stalled_closed and tcp_state(sock) != 1:
                stalled_closed[sock] = now() - stalled_full_at
        if t >= next_probe and probes < 20:
            next_probe += 0.5
            probes += 1
            probes_ok += get(port, "/healthz", args.probe_timeout) == 200
            if probes % 4 == 0:
                page_tries += 1
                page_ok += all(get(port, path, args.probe_timeout) == 200
                               for path in ("/", "/app.js", "/app.css", "/status", "/scans?newest=100"))
            if probes == 10:
                # A stream whose client leaves: the server's side of it must be gone within a second.
                sock = socket.create_connection(host)
                sock.sendall(request_head)
                sock.recv(4096)
                peer = sock.getsockname()[1]
                sock.close()
                closed_at = now()
                while now() - closed_at < 3 and 8 in server_side_states(port, peer):
                    time.sleep(0.01)
                left_freed.append(round(now() - closed_at, 3))
            figures = proc_status(args.pid)
            peak["Threads"] = max(peak["Threads"], figures["Threads"])
            peak["VmRSS"] = max(peak["VmRSS"], figures["VmRSS"])
    scans.running = False
    scans.join()
    figures = proc_status(args.pid)
    peak["Threads"] = max(peak["Threads"], figures["Threads"])
    peak["VmRSS"] = max(peak["VmRSS"], figures["VmRSS"])
    result.update({
        "probes": probes, "probesOK": probes_ok, "pageOK": page_ok, "pageTries": page_tries,
        "slowClosedAfter": sorted(round(x, 2) for x in slow_closed),
        "slowStillOpen": len(slow_open),
        "stalledClosedAfter": [round(stalled_closed[s], 2) if s in stalled_closed else None for s in stalled],
        "readingStreamsOpen": len(reading),
        "leftFreedAfter": left_freed,
        "threadsPeak": peak["Threads"], "rssKiBPeak": peak["VmRSS"],
        "scanQuietMs": round(statistics.median(quiet) * 1000, 1),
        "scanFloodedMs": round(statistics.median(scans.durations) * 1000, 1) if scans.durations else None,
        "scansFlooded": len(scans.durations),
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
