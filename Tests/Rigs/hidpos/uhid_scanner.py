#!/usr/bin/python3
"""A HID POS barcode scanner made with the kernel's uhid (as the kernel's own HID selftests do): its report
descriptor goes through the HID core to a real /dev/hidrawN, udev and the installed bridge.

    uhid_scanner.py SCRIPT.json
    uhid_scanner.py --serve SOCKET SCRIPT.json   (the gate box: steps come over SOCKET, one JSON line each)

SCRIPT: {"descriptor": "<hex>", "vendor": 3118, "product": 2951, "steps": [...]}, steps done in order:
  {"create": "name"}                  UHID_CREATE2 (bus USB): a new hidraw node
  {"wait": "needle", "count": N}      until the bridge's journal has N lines containing NEEDLE (20 s at most)
  {"code": "text", "aim": "]Q1"}      the code's Scanned Data Reports (56 bytes each, report ID 2, as the manuals)
  {"report": "<hex>"}                 one raw input report
  {"destroy": true}                   UHID_DESTROY: the device is unplugged
  {"stat": true}                      note "NODE GROUP MODE" of the hidraw nodes of this vendor and product
  {"pause": 0.2}
Prints {"ok", "step", "outputs": ["<hex>", ...], "nodes": [...]}: the output reports the bridge wrote (UHID_OUTPUT
events) and what "stat" noted.

With --serve, the script's own steps run first; then each connection to the Unix socket SOCKET sends steps, one JSON
line each, and gets one line back per step once it is done: `{"ok": true}` (a long-running scanner, as the gate box
test drives it through its shift).
"""
import glob
import grp
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

UHID_DESTROY, UHID_OUTPUT, UHID_CREATE2, UHID_INPUT2 = 1, 6, 11, 12
EVENT_SIZE = 4 + 4372  # sizeof(struct uhid_event): the type and the largest member, uhid_create2_req
BUS_USB = 3


def event(kind, body):
    data = struct.pack("<I", kind) + body
    return data + bytes(EVENT_SIZE - len(data))


def reports(data, aim):
    chunks = [data[i:i + 56] for i in range(0, len(data), 56)] or [b""]
    out = []
    for index, chunk in enumerate(chunks):
        report = bytearray(64)
        report[0], report[1] = 2, len(chunk)
        report[2:5] = aim.encode()[:3].ljust(3, b"\0")
        report[5:5 + len(chunk)] = chunk
        report[63] = 1 if index < len(chunks) - 1 else 0
        out.append(bytes(report))
    return out


def journal_count(needle):
    out = subprocess.run(["journalctl", "-u", "plings-bridge", "-b", "--no-pager", "-o", "cat"],
                         capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if needle in line)


def main():
    serve = None
    if sys.argv[1] == "--serve":
        serve = sys.argv[2]
        del sys.argv[1:3]
    with open(sys.argv[1]) as f:
        script = json.load(f)
    descriptor = bytes.fromhex(script["descriptor"])
    fd = os.open("/dev/uhid", os.O_RDWR | os.O_CLOEXEC)
    outputs = []
    nodes = []

    def drain(seconds=0.0):
        deadline = time.monotonic() + seconds
        while True:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return
            data = os.read(fd, EVENT_SIZE)
            if struct.unpack_from("<I", data)[0] == UHID_OUTPUT:
                size = struct.unpack_from("<H", data, 4 + 4096)[0]
                outputs.append(data[4:4 + size].hex())

    def run(item):
        """Does one step; False when a wait ran out."""
        if "create" in item:
            body = struct.pack("<128s64s64sHHIIII4096s", item["create"].encode(), b"uhid-test", b"UHID0077",
                               len(descriptor), BUS_USB, script["vendor"], script["product"], 0, 0, descriptor)
            os.write(fd, event(UHID_CREATE2, body))
        elif "wait" in item:
            deadline = time.monotonic() + 20
            while journal_count(item["wait"]) < item.get("count", 1):
                if time.monotonic() > deadline:
                    return False
                drain(0.1)
        elif "code" in item:
            for report in reports(item["code"].encode("utf-8", "surrogateescape"), item.get("aim", "]Q1")):
                os.write(fd, event(UHID_INPUT2, struct.pack("<H", len(report)) + report))
        elif "report" in item:
            report = bytes.fromhex(item["report"])
            os.write(fd, event(UHID_INPUT2, struct.pack("<H", len(report)) + report))
        elif "destroy" in item:
            os.write(fd, event(UHID_DESTROY, b""))
        elif "pause" in item:
            drain(min(float(item["pause"]), 5))
        elif "stat" in item:
            prefix = "0003:%04X:%04X." % (script["vendor"], script["product"])
            for sys_node in sorted(glob.glob("/sys/class/hidraw/hidraw*")):
                if os.path.basename(os.path.realpath(sys_node + "/device")).startswith(prefix):
                    node = "/dev/" + os.path.basename(sys_node)
                    st = os.stat(node)
                    nodes.append("%s %s %o" % (node, grp.getgrgid(st.st_gid).gr_name, st.st_mode & 0o777))
        return True

    ok, step = True, "none"
    for index, item in enumerate(script["steps"]):
        step = "%d:%s" % (index, json.dumps(item))
        ok = run(item)
        if not ok:
            break
    if serve:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(serve):
            os.remove(serve)
        listener.bind(serve)
        listener.listen(4)
        while True:
            # The kernel's events (output reports, open and close) are read while waiting for a client.
            if listener not in select.select([listener, fd], [], [])[0]:
                drain()
                continue
            client, _ = listener.accept()
            with client, client.makefile("rw") as lines:
                for line in lines:
                    answer = {"ok": run(json.loads(line))}
                    lines.write(json.dumps(answer) + "\n")
                    lines.flush()
                    drain()
    drain(0.5)
    os.close(fd)
    print(json.dumps({"ok": ok, "step": step, "outputs": outputs, "nodes": nodes}))


if __name__ == "__main__":
    main()
