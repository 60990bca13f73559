#!/usr/bin/python3
"""Drives a UMockdev.Testbed of serial (tty) and HID POS (hidraw) scanners around a plings-bridge child, step by step.

Run under umockdev-wrapper with /usr/bin/python3 (it has python3-gi):

  umockdev-wrapper /usr/bin/python3 serial_driver.py SCRIPT.json -- CMD...

umockdev emulates every character device node as a pty; hidraw nodes are put in raw mode here (the bridge does
not set termios on them, as a real hidraw node has none). A "plug" path is relative to this directory.

SCRIPT is a JSON list of steps, done in order, each bounded in time:
  {"plug": "acm0.umockdev", "event": false}  add the device (with "event": true also send its add uevent;
                                              devices plugged before CMD starts need none)
  {"start": true}                            start CMD
  {"wait": "needle", "count": 1}             wait until CMD's stderr has COUNT lines containing NEEDLE
  {"write": "/dev/ttyACM0", "hex": "0d0a"}   write the bytes to the scanner's side of the node (a hidraw node's
                                              reads return what one write wrote when each write is one report
                                              of the size the reader asks for)
  {"expect": "/dev/hidraw0", "hex": "0420"}  wait (5 s at most) until the child wrote these bytes to the node
  {"pause": 0.3}                             let time pass (an inter-byte gap is what some steps test)
  {"unplug": "acm0.umockdev"}                send remove uevents (child first) and remove the device
  {"exit": true}                             wait (15 s at most) for CMD to end by itself, successfully
  {"exit": "any"}                            the same, whatever its exit status

At the end CMD is stopped with SIGTERM. Prints one JSON object: {"ok", "step", "stdout": [lines], "stderr"}.
Re-adding a node name crashes umockdev 0.17.16: replug a scanner under a new name (acm1.umockdev).
"""
import json
import os
import select
import subprocess
import sys
import time
import tty

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

# The child process runner and the .umockdev helpers are the keyboard-scanner driver's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hid"))
from umockdev_driver import Child, syspaths  # noqa: E402


def main():
    if "--" not in sys.argv or sys.argv.index("--") != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        script = json.load(f)
    command = sys.argv[3:]
    here = os.path.dirname(os.path.abspath(__file__))
    testbed = UMockdev.Testbed.new()
    masters = {}
    child = None
    ok, step = True, "none"
    for index, item in enumerate(script):
        step = "%d:%s" % (index, json.dumps(item))
        if "plug" in item:
            description = os.path.join(here, item["plug"])
            if not testbed.add_from_file(description):
                ok = False
                break
            with open(description) as f:
                for line in f:
                    if line.startswith("N: hidraw"):
                        node = "/dev/" + line[3:].strip()
                        masters[node] = testbed.get_dev_fd(node)
                        tty.setraw(masters[node])
            if item.get("event"):
                testbed.uevent(syspaths(description)[-1], "add")
        elif "start" in item:
            child = Child(command)
        elif "wait" in item:
            ok = child is not None and child.wait_stderr(item["wait"], item.get("count", 1), timeout=15)
        elif "write" in item:
            node = item["write"]
            if node not in masters:
                masters[node] = testbed.get_dev_fd(node)
            os.write(masters[node], bytes.fromhex(item["hex"]))
        elif "expect" in item:
            node, wanted, got = item["expect"], bytes.fromhex(item["hex"]), b""
            deadline = time.monotonic() + 5
            while wanted not in got and time.monotonic() < deadline:
                if select.select([masters[node]], [], [], 0.1)[0]:
                    got += os.read(masters[node], 256)
            ok = wanted in got
        elif "pause" in item:
            time.sleep(min(float(item["pause"]), 5))
        elif "exit" in item:
            try:
                status = child.proc.wait(timeout=15) if child is not None else None
                ok = status == 0 or (status is not None and item["exit"] == "any")
            except subprocess.TimeoutExpired:
                ok = False
        elif "unplug" in item:
            paths = syspaths(os.path.join(here, item["unplug"]))
            for path in reversed(paths):
                testbed.uevent(path, "remove")
            testbed.remove_device(paths[0])
        if not ok:
            break
    if child is None:
        print(json.dumps({"ok": False, "step": "never started", "stdout": [], "stderr": ""}))
        return 3
    child.finish()
    print(json.dumps({"ok": ok, "step": step, "stdout": child.lines, "stderr": "\n".join(child.err)}))
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
