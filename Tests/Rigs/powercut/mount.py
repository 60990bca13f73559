"""Mounting powercutfs from a test or from scripts/powercut: start, cut the power, remount, stop."""
import errno
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FS = os.path.join(HERE, "powercutfs.py")


class PowerCutMount:
    """One powercutfs process serving `backing` at `mountpoint`. A cut leaves the durable state in `backing`;
    `mount()` again serves it."""

    def __init__(self, backing, mountpoint, harsh=False, seed=0, errfile=None, keep_cache=False):
        self.backing, self.mountpoint, self.harsh, self.seed = backing, mountpoint, harsh, seed
        self.keep_cache = keep_cache
        self.errfile = errfile
        self.proc = None
        self.mounts = 0
        os.makedirs(backing, exist_ok=True)
        os.makedirs(mountpoint, exist_ok=True)

    def mount(self, cut_on=None):
        argv = ["/usr/bin/python3", FS, self.backing, self.mountpoint, "--seed", str(self.seed + self.mounts)]
        if self.harsh:
            argv.append("--harsh")
        if self.keep_cache:
            argv.append("--keep-cache")
        if cut_on:
            argv += ["--cut-on", cut_on]
        err = open(self.errfile, "ab") if self.errfile else None
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err or sys.stderr, text=True)
        if err:
            err.close()
        line = self.proc.stdout.readline().strip()
        if line != "READY":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"powercutfs did not mount {self.mountpoint}: {line!r}")
        self.mounts += 1

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def cut(self):
        """The power cut: un-synced data is gone. Returns once the file system process has exited and the
        dead mount is detached (files still open on it fail with ENOTCONN)."""
        if self.alive():
            self.proc.send_signal(signal.SIGUSR1)
        self.proc.wait()
        self.detach()

    def fail_writes(self, failing=True):
        """Makes the disk fail every change with EIO (reads still work), or well again; returns once a probe
        file at the mount's root shows it."""
        self.proc.send_signal(signal.SIGUSR2 if failing else signal.SIGHUP)
        probe = os.path.join(self.mountpoint, ".powercutfs-probe")
        for _ in range(500):
            try:
                with open(probe, "wb") as f:
                    f.write(b"probe")
                if not failing:
                    return
            except OSError as e:
                if failing and e.errno == errno.EIO:
                    return
            time.sleep(0.01)
        raise RuntimeError(f"powercutfs did not become {'failing' if failing else 'well'}")

    def detach(self):
        subprocess.run(["umount", "-l", self.mountpoint], stderr=subprocess.DEVNULL)
        if self.proc is not None:
            self.proc.stdout.close()
        self.proc = None

    def stop(self):
        """A clean shutdown: everything pending is synced first."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.detach()

    def last_cut(self):
        """The last line of cuts.log (reason and counts), or None."""
        try:
            with open(os.path.join(self.backing, "cuts.log")) as f:
                lines = f.read().splitlines()
            return lines[-1] if lines else None
        except OSError:
            return None
