#!/usr/bin/python3
"""Drives a UMockdev.Testbed around a plings-bridge child for the cases umockdev-run cannot express.

Run under umockdev-wrapper with /usr/bin/python3 (it has python3-gi; the pyenv python3 has not):

  umockdev-wrapper /usr/bin/python3 umockdev_driver.py hotplug DEV1 EVENTS1 DEV2 EVENTS2 -- CMD...
      starts CMD with no devices, plugs DEV1 in (its event node gets EVENTS1), waits for its line, unplugs
      it (remove uevents, child first), replugs the scanner as DEV2 (a new node name: re-adding a node
      name crashes umockdev 0.17.16) with EVENTS2, waits for that line, then stops CMD.
  umockdev-wrapper /usr/bin/python3 umockdev_driver.py ebusy DEV EVENTS -- CMD...
      DEV's node answers EVIOCGRAB with EBUSY (another process holds the grab) and CMD runs to its end.
  umockdev-wrapper /usr/bin/python3 umockdev_driver.py heldkey DEV EVENTS -- CMD...
      DEV's node says KEY_A is held (EVIOCGKEY); EVIOCGRAB calls are counted and reported as a last
      stdout line {"grabs": N}.

Prints one JSON object: {"ok", "stdout": [lines], "stderr": text, "step"}; every wait is bounded.
"""
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import GLib, UMockdev  # noqa: E402

EVIOCGRAB = 0x40044590


class Child:
    """CMD with its stdout lines and stderr text collected by threads, waitable with deadlines."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines, self.err = [], []
        self.cond = threading.Condition()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True).start()

    def _pump(self, stream, sink):
        for line in stream:
            with self.cond:
                sink.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def wait_stdout(self, needle, timeout=10):
        return self.wait(lambda: any(needle in line for line in self.lines), timeout)

    def wait_stderr(self, needle, count=1, timeout=10):
        return self.wait(lambda: sum(needle in line for line in self.err) >= count, timeout)

    def finish(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        time.sleep(0)  # let the pump threads see EOF
        self.wait(lambda: False, 0.2)


def syspaths(description):
    """The sysfs paths of a .umockdev file's devices, parents first."""
    with open(description) as f:
        return ["/sys" + line[3:].strip() for line in f if line.startswith("P: ")]


def node(description):
    with open(description) as f:
        names = [line[3:].strip() for line in f if line.startswith("N: input/")]
    return "/dev/" + names[-1]


def plug(testbed, description, events):
    if not testbed.add_from_file(description):
        raise RuntimeError("cannot add " + description)
    testbed.load_evemu_events(node(description), events)
    testbed.uevent(syspaths(description)[-1], "add")


def unplug(testbed, description):
    paths = syspaths(description)
    for path in reversed(paths):
        testbed.uevent(path, "remove")
    testbed.remove_device(paths[0])


def report(ok, step, child):
    print(json.dumps({"ok": ok, "step": step, "stdout": child.lines, "stderr": "\n".join(child.err)}))
    sys.stdout.flush()
    return 0 if ok else 3


def hotplug(args, command):
    dev1, events1, dev2, events2 = args
    testbed = UMockdev.Testbed.new()
    child = Child(command)
    step = "start"
    ok = child.wait_stderr("watching scanners")
    if ok:
        step = "plug"
        plug(testbed, dev1, events1)
        ok = child.wait_stdout('"raw":"scan-1"')
    if ok:
        step = "unplug"
        unplug(testbed, dev1)
        ok = child.wait_stderr("scanner removed")
    if ok:
        step = "replug"
        plug(testbed, dev2, events2)
        ok = child.wait_stdout('"raw":"scan-2"')
    child.finish()
    return report(ok, step, child)


class BusyGrab(UMockdev.IoctlBase):
    """Answers EVIOCGRAB with EBUSY, as the kernel does when another fd holds the grab."""

    def do_handle_ioctl(self, client):
        if client.get_request() == EVIOCGRAB:
            client.complete(-1, errno.EBUSY)
            return True
        return False


class HeldKey(UMockdev.IoctlBase):
    """Answers EVIOCGKEY with KEY_A held (as if the scanner was mid-keystroke when opened) and counts grabs."""

    EVIOCGKEY_96 = 0x80604518
    KEY_A = 30

    def __init__(self):
        super().__init__()
        self.grabs = 0

    def do_handle_ioctl(self, client):
        request = client.get_request()
        if request == self.EVIOCGKEY_96:
            bitmap = bytearray(96)
            bitmap[self.KEY_A // 8] |= 1 << (self.KEY_A % 8)
            client.get_arg().resolve(0, 96).update(0, bytes(bitmap))
            client.complete(96, 0)
            return True
        if request == EVIOCGRAB:
            self.grabs += 1
            client.complete(0, 0)
            return True
        return False


def run_with_ioctl_handler(args, command, handler):
    """DEV's node answers ioctls through `handler` (on its own GLib loop), gets EVENTS, and CMD runs to
    its end (bounded: 30 s)."""
    dev, events = args
    testbed = UMockdev.Testbed.new()
    if not testbed.add_from_file(dev):
        raise RuntimeError("cannot add " + dev)
    context = GLib.MainContext.new()
    loop = GLib.MainLoop.new(context, False)
    context.push_thread_default()
    testbed.attach_ioctl(node(dev), handler)
    context.pop_thread_default()
    threading.Thread(target=loop.run, daemon=True).start()
    testbed.load_evemu_events(node(dev), events)
    child = Child(command)
    child.proc.wait(timeout=30)
    child.finish()
    loop.quit()
    return child


def heldkey(args, command):
    handler = HeldKey()
    child = run_with_ioctl_handler(args, command, handler)
    child.lines.append(json.dumps({"grabs": handler.grabs}))
    return report(child.proc.returncode == 0, "run", child)


def ebusy(args, command):
    child = run_with_ioctl_handler(args, command, BusyGrab())
    return report(child.proc.returncode == 0, "run", child)


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    split = sys.argv.index("--")
    mode, args, command = sys.argv[1], sys.argv[2:split], sys.argv[split + 1:]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit({"hotplug": hotplug, "ebusy": ebusy, "heldkey": heldkey}[mode](args, command))


if __name__ == "__main__":
    main()
