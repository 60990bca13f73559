#!/usr/bin/python3
"""Benchmark baseline: tap-to-URL time of a minimal pyscard Type 2 tag reader.

For each tap: wait until SCardGetStatusChange reports a card on the reader (t0), connect,
send exactly the APDUs the bridge sends for a Type 2 tag (`FF CA 00 00 00` for the UID,
`FF B0 00 03 10` for the CC and the first 12 data bytes, then `FF B0 00 PP 10` only while the
TLVs need more bytes, never starting past the CC-declared data area), parse the NDEF URI
record, print the URL (t1). One JSON line per tap, then a summary line with the median.

    pyscard_baseline.py [--reader NAME|INDEX] [--count N]              # taps from elsewhere
    pyscard_baseline.py --rig [--count N] [--kind ntag213] [--url URL]   # drives nfc_rig.py

`--rig` starts nfc_rig.py (and with it pcscd) and taps by itself, each tap after a random
0..0.4 s pause so taps fall at random points of pcscd's 400 ms presence poll; `tap_ms` is then
the time from writing `tap` to the rig until SCardGetStatusChange reported the card (that
poll latency is not part of `ms`).
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

from smartcard import scard as S

HERE = os.path.dirname(os.path.abspath(__file__))
PLINGS_URL = "https://s.plings.io/?t=n&i=4kyQCd5tMDjJVWJKRzVT&p=4.2.3.3.6"
PART3_STORAGE = bytes.fromhex("804F0CA000000306")  # PC/SC part 3 storage card RID + PIX start
URI_PREFIXES = [
    "", "http://www.", "https://www.", "http://", "https://", "tel:", "mailto:",
    "ftp://anonymous:anonymous@", "ftp://ftp.", "ftps://", "sftp://", "smb://", "nfs://",
    "ftp://", "dav://", "news:", "telnet://", "imap:", "rtsp://", "urn:", "pop:", "sip:",
    "sips:", "tftp:", "btspp://", "btl2cap://", "btgoep://", "tcpobex://", "irdaobex://",
    "file://", "urn:epc:id:", "urn:epc:tag:", "urn:epc:pat:", "urn:epc:raw:", "urn:epc:",
    "urn:nfc:",
]


class ReadError(Exception):
    pass


def check(hr, what):
    if hr != S.SCARD_S_SUCCESS:
        raise ReadError("%s: %s (0x%08X)" % (what, S.SCardGetErrorMessage(hr), hr & 0xFFFFFFFF))


class Type2Reader(object):
    """The bridge's Type 2 read, APDU for APDU."""

    def __init__(self, card, pci):
        self.card, self.pci, self.apdus = card, pci, 0

    def transmit(self, apdu):
        hr, resp = S.SCardTransmit(self.card, self.pci, list(apdu))
        self.apdus += 1
        check(hr, "SCardTransmit %s" % apdu.hex())
        resp = bytes(resp)
        if len(resp) < 2:
            raise ReadError("response shorter than 2 bytes to %s" % apdu.hex())
        if resp[-2:] != b"\x90\x00":
            raise ReadError("%s answered SW %s" % (apdu.hex(), resp[-2:].hex()))
        return resp[:-2]

    def read(self):
        uid = self.transmit(bytes.fromhex("FFCA000000"))
        first = self.transmit(bytes.fromhex("FFB0000310"))
        if len(first) < 4:
            raise ReadError("short CC read")
        cc, data = first[:4], bytearray(first[4:])
        if cc[0] != 0xE1 or cc[1] >> 4 != 1:
            raise ReadError("no NDEF capability container: %s" % cc.hex())
        area = cc[2] * 8  # data area bytes declared by the CC

        def need(n):  # make data[0:n] available, reading whole pages from page 4 + len/4
            if n > area:
                raise ReadError("TLV runs past the CC data area (%d > %d)" % (n, area))
            while len(data) < n:
                page = 4 + len(data) // 4
                chunk = self.transmit(bytes([0xFF, 0xB0, 0x00, page, 0x10]))
                if not chunk:
                    raise ReadError("empty read at page %d" % page)
                del data[(page - 4) * 4:]
                data.extend(chunk)  # advance by what the reader returned (4 or 16 bytes)

        pos = 0
        while True:
            need(pos + 1)
            t = data[pos]
            if t == 0x00:
                pos += 1
                continue
            if t == 0xFE:
                return uid, None
            need(pos + 2)
            length, hdr = data[pos + 1], 2
            if length == 0xFF:
                need(pos + 4)
                length, hdr = (data[pos + 2] << 8) | data[pos + 3], 4
            if t == 0x03:
                need(pos + hdr + length)
                return uid, bytes(data[pos + hdr:pos + hdr + length])
            pos += hdr + length  # lock, memory control, proprietary, unknown: skip


def first_uri(message):
    i = 0
    while message and i < len(message):
        h = message[i]
        sr, il, tnf = h & 0x10, h & 0x08, h & 0x07
        tlen = message[i + 1]
        if sr:
            plen, j = message[i + 2], i + 3
        else:
            plen, j = int.from_bytes(message[i + 2:i + 6], "big"), i + 6
        idlen = message[j] if il else 0
        j += 1 if il else 0
        rtype = message[j:j + tlen]
        payload = message[j + tlen + idlen:j + tlen + idlen + plen]
        if tnf == 1 and rtype == b"U" and payload:
            prefix = URI_PREFIXES[payload[0]] if payload[0] < len(URI_PREFIXES) else ""
            return prefix + payload[1:].decode("utf-8", "replace")
        if h & 0x40:  # ME
            break
        i = j + tlen + idlen + plen
    return None


def wait_state(ctx, reader, present, timeout_s):
    """Block until the reader has (or has not) a card; returns (monotonic time, state, ATR)."""
    state = S.SCARD_STATE_UNAWARE
    deadline = time.monotonic() + timeout_s
    while True:
        left = int(max(0.0, deadline - time.monotonic()) * 1000)
        hr, states = S.SCardGetStatusChange(ctx, left, [(reader, state)])
        now = time.monotonic()
        if hr == S.SCARD_E_TIMEOUT:
            raise ReadError("no %s within %.1fs" % ("card" if present else "removal", timeout_s))
        check(hr, "SCardGetStatusChange")
        _, state, atr = states[0]
        if bool(state & S.SCARD_STATE_PRESENT) == present and not state & S.SCARD_STATE_MUTE:
            return now, state, bytes(atr)
        state &= ~S.SCARD_STATE_CHANGED


def one_tap(ctx, reader, timeout_s, on_wait=None):
    t0, state, atr = wait_state(ctx, reader, True, timeout_s)
    result = {"reader": reader, "event": state >> 16, "atr": atr.hex().upper()}
    card = None
    try:
        if PART3_STORAGE not in atr:
            raise ReadError("not a PC/SC part 3 storage card ATR")
        hr, card, proto = S.SCardConnect(ctx, reader, S.SCARD_SHARE_SHARED,
                                         S.SCARD_PROTOCOL_T0 | S.SCARD_PROTOCOL_T1)
        check(hr, "SCardConnect")
        pci = S.SCARD_PCI_T1 if proto == S.SCARD_PROTOCOL_T1 else S.SCARD_PCI_T0
        t_conn = time.monotonic()
        rd = Type2Reader(card, pci)
        try:
            uid, message = rd.read()
        finally:
            result["apdus"] = rd.apdus
        url = first_uri(message) if message else None
        sys.stdout.write(("URL %s\n" % url) if url else "NO URL\n")
        sys.stdout.flush()
        t1 = time.monotonic()
        result.update(uid=uid.hex().upper(), url=url, ok=url is not None,
                      connect_ms=round((t_conn - t0) * 1000, 2), ms=round((t1 - t0) * 1000, 2))
    except (ReadError, IndexError) as e:
        result.update(ok=False, error=str(e), ms=round((time.monotonic() - t0) * 1000, 2))
    finally:
        if card is not None:
            S.SCardDisconnect(card, S.SCARD_LEAVE_CARD)
    return t0, result


class Rig(object):
    def __init__(self, verbose):
        args = ["/usr/bin/python3", os.path.join(HERE, "nfc_rig.py")]
        self.p = subprocess.Popen(args + (["-v"] if verbose else []), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self.p.stdout.readline().strip()
        if line != "READY":
            raise SystemExit("nfc_rig.py: %r" % line)

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return time.monotonic()

    def answer(self):
        line = self.p.stdout.readline().strip()
        if not line.startswith("OK"):
            raise SystemExit("nfc_rig.py: %r" % line)
        return line

    def close(self):
        try:
            self.send("quit")
            self.p.wait(10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reader", default="0", help="reader name or index (default 0)")
    ap.add_argument("--count", type=int, default=10, help="number of taps (default 10)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each tap")
    ap.add_argument("--rig", action="store_true", help="start nfc_rig.py and tap by itself")
    ap.add_argument("--kind", default="ntag213", help="--rig: tag kind (default ntag213)")
    ap.add_argument("--url", default=PLINGS_URL, help="--rig: URL on the tag")
    ap.add_argument("--uid", default="04A1B2C3D4E5F6", help="--rig: tag UID")
    ap.add_argument("--verbose", action="store_true", help="--rig: rig logs every APDU")
    ap.add_argument("--delay", type=float, default=0.0,
                    help="--rig: per-exchange delay of the virtual reader in ms (models a USB reader)")
    ap.add_argument("--personality", default="plain",
                    help="--rig: reader personality (plain, acr122u, part3); the baseline's APDUs are the same")
    args = ap.parse_args()

    rig = Rig(args.verbose) if args.rig else None
    try:
        hr, ctx = S.SCardEstablishContext(S.SCARD_SCOPE_USER)
        check(hr, "SCardEstablishContext")
        hr, readers = S.SCardListReaders(ctx, [])
        check(hr, "SCardListReaders")
        reader = readers[int(args.reader)] if args.reader.isdigit() else args.reader
        index = readers.index(reader)
        if rig:
            rig.send("reader %d %s delay=%g" % (index, args.personality, args.delay))
            rig.answer()
        times, tap_times = [], []
        rnd = random.Random(1)
        for i in range(1, args.count + 1):
            t_tap = None
            if rig:
                time.sleep(rnd.uniform(0.0, 0.4))
                t_tap = rig.send("tap %d %s %s - url=%s" % (index, args.kind, args.uid, args.url))
            else:
                sys.stderr.write("tap %d/%d on %s\n" % (i, args.count, reader))
            t0, result = one_tap(ctx, reader, args.timeout)
            result["tap"] = i
            if rig:
                result["tap_ms"] = round((t0 - t_tap) * 1000, 1)
                tap_times.append(result["tap_ms"])
                rig.answer()  # "OK tap ..."
                rig.send("remove %d" % index)
                rig.answer()
            wait_state(ctx, reader, False, args.timeout)
            print(json.dumps(result), flush=True)
            if result["ok"]:
                times.append(result["ms"])
        summary = {"count": args.count, "ok": len(times), "failed": args.count - len(times)}
        if times:
            summary.update(median_ms=round(statistics.median(times), 2),
                           min_ms=min(times), max_ms=max(times),
                           mean_ms=round(statistics.mean(times), 2))
        if tap_times:
            summary.update(tap_median_ms=round(statistics.median(tap_times), 1),
                           tap_min_ms=min(tap_times), tap_max_ms=max(tap_times))
        print(json.dumps({"summary": summary}), flush=True)
        S.SCardReleaseContext(ctx)
        return 0 if times and len(times) == args.count else 1
    finally:
        if rig:
            rig.close()


if __name__ == "__main__":
    sys.exit(main())
