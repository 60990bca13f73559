#!/usr/bin/python3
"""gpsd test rig: an NMEA writer on a pty plus a real gpsd on a private loopback port.

The Swift tests spawn this script and drive it line by line through stdin; see
README-gps.md for the protocol and for what gpsd 3.22 reports for the sentences written here.

    gps_rig.py [--port 0] [--rate 1] [--lat 59.3293] [--lon 18.0686] [--no-gpsd]

Standard library only, so it runs with the system /usr/bin/python3 and nothing installed.
"""

import argparse
import atexit
import datetime
import fcntl
import math
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
import tty

READY_TIMEOUT = 5.0  # seconds gpsd gets to greet a client after it was started
APPLY_TIMEOUT = 2.0  # seconds a command waits for the writer to put its change on the pty
STOP_TIMEOUT = 5.0  # seconds gpsd gets to exit after SIGTERM before it is killed

# gpsd 3.22 turns HDOP into eph as eph = HDOP * EPH_PER_HDOP (measured; see README-gps.md).
# `error M` therefore writes HDOP = M / EPH_PER_HDOP.
EPH_PER_HDOP = 19.0

# A fixed sky: (PRN, elevation, azimuth, SNR). The first USED are reported as used in GSA.
SKY = [(2, 62, 110, 44), (5, 48, 270, 42), (12, 35, 45, 40), (15, 71, 190, 46),
       (18, 22, 320, 36), (24, 15, 150, 33), (25, 40, 225, 39), (29, 8, 10, 28)]
USED = 7
GEOID_SEPARATION = 23.5  # metres, roughly Stockholm; gpsd reports it as geoidSep


def log(msg):
    print("gps_rig: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# NMEA formatting


def sentence(body):
    """Wraps `body` (the part between `$` and `*`) into a sentence with its XOR checksum."""
    checksum = 0
    for byte in body.encode("ascii"):
        checksum ^= byte
    return "$%s*%02X\r\n" % (body, checksum)


def utc_fields(t):
    """Returns (hhmmss.ss, ddmmyy) for the epoch time `t`, rounded to centiseconds."""
    centis = int(round(t * 100))
    seconds, frac = divmod(centis, 100)
    dt = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return dt.strftime("%H%M%S") + ".%02d" % frac, dt.strftime("%d%m%y")


def angle(value, degree_digits):
    """Formats degrees as NMEA (d)ddmm.mmmmm, as u-blox does (1e-5 minute is under 2 cm)."""
    a = abs(value)
    degrees = int(a)
    minutes = round((a - degrees) * 60.0, 5)
    if minutes >= 60.0:  # rounding carried into the next degree
        degrees, minutes = degrees + 1, minutes - 60.0
    return "%0*d%08.5f" % (degree_digits, degrees, minutes)


def cycle(state, t, lead_gsa=False):
    """All sentences of one receiver cycle stamped with the epoch time `t` (already skewed).

    Order as a u-blox receiver sends them: RMC, GGA, GSA, GSV..., GST. gpsd 3.22 tags GGA as
    the cycle ender and sends the TPV right after it, then SKY (after the last GSV) and GST.
    `lead_gsa` repeats the GSA in front, so a changed HDOP is already known at that GGA.
    """
    hms, dmy = utc_fields(t)
    out = []
    if state.phase == "fix":
        lat = angle(state.lat, 2) + ("," + ("N" if state.lat >= 0 else "S"))
        lon = angle(state.lon, 3) + ("," + ("E" if state.lon >= 0 else "W"))
        hdop = state.error / EPH_PER_HDOP
        pdop, vdop = hdop * 1.6, hdop * 1.3
        used = [s[0] for s in SKY[:USED]]
        out.append("GPRMC,%s,A,%s,%s,0.00,,%s,,,A" % (hms, lat, lon, dmy))
        # gpsd 3.22 takes 3D from a GGA altitude whatever GSA says: a 2D fix has none.
        alt = "%.1f,M,%.1f,M" % (state.alt, GEOID_SEPARATION) if state.mode == 3 else ",M,,M"
        out.append("GPGGA,%s,%s,%s,1,%02d,%.5f,%s,," % (hms, lat, lon, len(used), hdop, alt))
        prns = ["%02d" % p for p in used] + [""] * (12 - len(used))
        out.append("GPGSA,A,%d,%s,%.5f,%.5f,%.5f" % (state.mode, ",".join(prns), pdop, hdop, vdop))
        out.extend(gsv(with_snr=True))
        # GST: rms, semi-major, semi-minor, orientation, lat/lon/alt 1-sigma errors in metres.
        sigma = state.error / math.sqrt(2.0)
        out.append("GPGST,%s,%.2f,%.2f,%.2f,0.0,%.2f,%.2f,%.2f"
                   % (hms, state.error * 0.5, sigma, sigma, sigma, sigma, state.error * 1.5))
    else:  # "nofix": a receiver that knows the time but has no position
        out.append("GPRMC,%s,V,,,,,,,%s,,,N" % (hms, dmy))
        out.append("GPGGA,%s,,,,,0,00,99.99,,,,,," % hms)
        out.append("GPGSA,A,1,,,,,,,,,,,,,99.99,99.99,99.99")
        out.extend(gsv(with_snr=False))
    if lead_gsa:
        out.insert(0, [b for b in out if b.startswith("GPGSA")][0])
    return "".join(sentence(body) for body in out).encode("ascii")


def gsv(with_snr):
    """GSV sentences for SKY, four satellites each; no SNR while there is no fix."""
    pages = [SKY[i:i + 4] for i in range(0, len(SKY), 4)]
    out = []
    for n, page in enumerate(pages, 1):
        sats = ",".join("%02d,%02d,%03d,%s" % (prn, el, az, ("%02d" % snr) if with_snr else "")
                        for prn, el, az, snr in page)
        out.append("GPGSV,%d,%d,%02d,%s" % (len(pages), n, len(SKY), sats))
    return out


# ---------------------------------------------------------------------------------------------
# The writer thread


class FeedState:
    """What the receiver currently claims. Changed by commands, read by the writer."""

    def __init__(self, lat, lon, rate, error):
        self.phase = "fix"  # fix | nofix | silence
        self.mode = 3  # GSA fix mode while phase == fix (3D; `fix2d` sets 2)
        self.lat, self.lon, self.alt = lat, lon, 28.0
        self.rate = rate  # cycles per second
        self.skew = 0.0  # seconds added to the real UTC time before it is written
        self.error = error  # metres: gpsd's eph (HDOP = error / EPH_PER_HDOP), GST sigmas


class Writer(threading.Thread):
    """Writes one NMEA cycle per 1/rate seconds to the pty master, aligned to the wall clock.

    A command bumps `generation`; the writer then writes a cycle at once (so the change reaches
    gpsd without waiting for the next tick) and publishes `written` so the command can answer.
    """

    def __init__(self, master_fd, state):
        super().__init__(name="nmea-writer", daemon=True)
        self.fd = master_fd
        self.state = state
        self.cond = threading.Condition()
        self.generation = 0
        self.written = 0
        self.stopping = False
        self.cycles = 0
        self.dropped = 0  # cycles (or their tails) lost because nobody read the pty

    def change(self, **fields):
        """Applies `fields` to the state and waits until the writer acted on them."""
        with self.cond:
            for key, value in fields.items():
                setattr(self.state, key, value)
            self.generation += 1
            target = self.generation
            self.cond.notify_all()
            ok = self.cond.wait_for(lambda: self.written >= target or self.stopping, APPLY_TIMEOUT)
        return ok

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.join(2.0)

    def run(self):
        next_tick, rate = 0.0, None
        last_dops = (self.state.phase, self.state.mode, self.state.error)
        while True:
            with self.cond:
                if rate != self.state.rate:  # first run or a rate change: realign to the clock
                    rate = self.state.rate
                    next_tick = math.floor(time.time() * rate + 1) / rate
                self.cond.wait_for(lambda: self.stopping or self.generation != self.written,
                                   max(0.0, next_tick - time.time()))
                if self.stopping:
                    return
                now = time.time()
                if self.generation != self.written:  # a command is waiting: write now
                    # gpsd 3.22 reports the TPV at GGA with eph from the HDOP of the last GSA,
                    # so a changed HDOP would show one cycle late; a GSA sent ahead of the
                    # cycle makes it show in the very next TPV.
                    dops = (self.state.phase, self.state.mode, self.state.error)
                    self.emit(self.render(now, lead_gsa=dops != last_dops))
                    last_dops = dops
                    self.written = self.generation
                    self.cond.notify_all()
                elif now >= next_tick:
                    self.emit(self.render(next_tick))
                    last_dops = (self.state.phase, self.state.mode, self.state.error)
                    next_tick += 1.0 / rate
                    if next_tick <= now:  # fell behind (machine suspended?): skip, never burst
                        next_tick = math.floor(now * rate + 1) / rate

    def render(self, t, lead_gsa=False):
        if self.state.phase == "silence":
            return b""
        return cycle(self.state, t + self.state.skew, lead_gsa)

    def emit(self, data):
        """Writes without blocking: with nobody reading, the pty fills up and cycles drop."""
        self.drain()
        if not data:
            return
        try:
            written = os.write(self.fd, data)
        except BlockingIOError:
            written = 0
        except OSError as e:
            log("write to pty failed: %s" % e)
            written = 0
        if written == len(data):
            self.cycles += 1
        else:  # a torn sentence fails its checksum in gpsd; start-gpsd flushes the rest
            self.dropped += 1

    def drain(self):
        """Discards anything written towards the receiver (gpsd -b should send nothing)."""
        try:
            while os.read(self.fd, 4096):
                pass
        except OSError:  # EAGAIN: empty; EIO: no slave open
            pass


# ---------------------------------------------------------------------------------------------
# gpsd


# Kills gpsd if this rig dies without cleaning up (even SIGKILL): it waits on a pipe whose only
# writer is the rig. "d" disarms it; end of file (the rig is gone) kills gpsd. PR_SET_PDEATHSIG
# cannot do this job: gpsd drops root for user gpsd and that clears the death signal.
GUARD = 'trap "" INT TERM HUP; read -r x; [ "$x" = d ] || kill -9 "$1" 2>/dev/null'


def free_port():
    """A loopback port that was free a moment ago (bind to 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    """True when something listens on 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def serves(port, timeout):
    """True when gpsd on `port` greets a new client with its VERSION line.

    gpsd 3.22 binds its port at once but then spends ~1 s probing the device (Garmin, GeoStar,
    TSIP, iSync) before its main loop runs: a TCP connect alone does not mean it answers.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(256).startswith(b'{"class":"VERSION"')
    except OSError:
        return False


class RigError(Exception):
    pass


class Gpsd:
    """One gpsd at a time on `port`, reading the pty slave; restartable on the same port."""

    def __init__(self, binary, port, tty_path, slave_fd, workdir, debug):
        self.binary, self.port, self.tty_path = binary, port, tty_path
        self.slave_fd, self.workdir, self.debug = slave_fd, workdir, debug
        self.control = os.path.join(workdir, "gpsd.sock")
        self.log_path = os.path.join(workdir, "gpsd.log")
        self.proc = None
        self.guard = None  # (Popen, write end of its pipe)
        self.last_exit = None

    def running(self):
        self.reap()
        return self.proc is not None

    def reap(self):
        """Notices a gpsd that died on its own (and keeps it from staying a zombie)."""
        if self.proc is not None and self.proc.poll() is not None:
            self.last_exit = self.proc.returncode
            self.proc = None
            self.disarm()

    def start(self):
        if self.running():
            raise RigError("gpsd already running (pid %d)" % self.proc.pid)
        if accepts(self.port):
            raise RigError("port %d is taken by something else" % self.port)
        # Sentences written while no gpsd was reading sit in the tty buffer with old times;
        # a fresh gpsd must not see them.
        termios.tcflush(self.slave_fd, termios.TCIOFLUSH)
        try:
            os.unlink(self.control)
        except FileNotFoundError:
            pass
        argv = [self.binary, "-N", "-n", "-b", "-S", str(self.port), "-F", self.control]
        if self.debug:
            argv += ["-D", str(self.debug)]
        argv.append(self.tty_path)
        with open(self.log_path, "ab") as logf:
            logf.write(("--- %s %s\n" % (time.strftime("%H:%M:%S"), " ".join(argv))).encode())
            logf.flush()
            # stdout/stderr to the log, never to our stdout: an orphaned gpsd holding the test's
            # pipe would make the test wait for EOF forever.
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=subprocess.STDOUT, close_fds=True)
        read_end, write_end = os.pipe()
        guard = subprocess.Popen(["/bin/sh", "-c", GUARD, "gps_rig-guard", str(self.proc.pid)],
                                 stdin=read_end, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, close_fds=True)
        os.close(read_end)
        self.guard = (guard, write_end)
        deadline = time.monotonic() + READY_TIMEOUT
        while not serves(self.port, max(0.05, deadline - time.monotonic())):
            if self.proc.poll() is not None:
                self.reap()
                raise RigError("gpsd exited with %s during start; see %s"
                               % (self.last_exit, self.log_path))
            if time.monotonic() > deadline:
                self.kill()
                raise RigError("gpsd did not answer on 127.0.0.1:%d within %.0f s"
                               % (self.port, READY_TIMEOUT))
            time.sleep(0.01)

    def stop(self, sig):
        """Sends `sig` and waits for gpsd to exit (SIGKILL after STOP_TIMEOUT)."""
        if not self.running():
            return
        proc = self.proc
        proc.send_signal(sig)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log("gpsd ignored signal %d; killing it" % sig)
            proc.kill()
            proc.wait()
        self.reap()

    def kill(self):
        self.stop(signal.SIGKILL)

    def disarm(self):
        if self.guard is None:
            return
        guard, write_end = self.guard
        self.guard = None
        try:
            os.write(write_end, b"d\n")
        except OSError:
            pass
        os.close(write_end)
        try:
            guard.wait(2.0)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()


# ---------------------------------------------------------------------------------------------
# The rig: stdin commands


class Rig:
    """The pty, the writer and gpsd, and the commands that drive them."""

    def __init__(self, args):
        self.args = args
        self.workdir = tempfile.mkdtemp(prefix="gps_rig.")
        # The pty: we keep the slave open too, so the master never sees a hang-up while gpsd
        # is down, and set it raw so nothing is echoed back into the master.
        self.master_fd, self.slave_fd = pty.openpty()
        tty.setraw(self.slave_fd)
        self.tty_path = os.ttyname(self.slave_fd)
        os.chmod(self.tty_path, 0o666)  # gpsd drops root (to user gpsd) and may reopen it
        flags = fcntl.fcntl(self.master_fd, fcntl.F_GETFL)
        fcntl.fcntl(self.master_fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self.state = FeedState(args.lat, args.lon, args.rate, args.error)
        self.writer = Writer(self.master_fd, self.state)
        self.gpsd = None
        self.closed = False

    def start(self):
        self.writer.start()
        port = self.args.port or free_port()
        for attempt in range(3):
            self.gpsd = Gpsd(self.args.gpsd, port, self.tty_path, self.slave_fd, self.workdir,
                             self.args.gpsd_debug)
            if self.args.no_gpsd:
                return
            try:
                self.start_gpsd()
                return
            except RigError as e:
                # With --port 0 the port we picked may have been taken since: pick another.
                if self.args.port or attempt == 2:
                    raise
                log("%s; retrying on another port" % e)
                port = free_port()

    def start_gpsd(self):
        self.gpsd.start()
        # Write a cycle at once rather than at the next tick: gpsd reports the first fix as
        # soon as it has read one cycle, so tests do not wait up to 1/rate for it.
        self.change()

    def close(self):
        """Idempotent teardown: gpsd first (it reads the pty), then the writer, then the pty."""
        if self.closed:
            return
        self.closed = True
        if self.gpsd is not None:
            self.gpsd.kill()
        self.writer.stop()
        for fd in (self.master_fd, self.slave_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)

    def status(self):
        s, g = self.state, self.gpsd
        fields = [("phase", s.phase), ("mode", s.mode if s.phase == "fix" else 1),
                  ("lat", "%.7f" % s.lat), ("lon", "%.7f" % s.lon), ("alt", "%.1f" % s.alt),
                  ("rate", "%g" % s.rate), ("skew", "%g" % s.skew), ("error", "%g" % s.error),
                  ("gpsd", "running" if g.running() else "stopped"),
                  ("pid", g.proc.pid if g.proc else "-"),
                  ("last_exit", "-" if g.last_exit is None else g.last_exit),
                  ("port", g.port), ("pty", self.tty_path), ("cycles", self.writer.cycles),
                  ("dropped", self.writer.dropped), ("log", g.log_path)]
        return " ".join("%s=%s" % kv for kv in fields)

    def handle(self, line):
        """Runs one command; returns the reply line. Raises SystemExit for quit."""
        words = line.split()
        cmd, params = words[0], words[1:]
        try:
            if cmd in ("fix", "fix2d"):
                changes = {"phase": "fix", "mode": 3 if cmd == "fix" else 2}
                if len(params) not in (0, 2, 3):
                    raise RigError("usage: %s [LAT LON [ALT]]" % cmd)
                if params:
                    lat, lon = number(params[0], -90, 90), number(params[1], -180, 180)
                    changes.update(lat=lat, lon=lon)
                if len(params) == 3:
                    changes["alt"] = number(params[2], -1000, 100000)
                self.change(**changes)
            elif cmd in ("nofix", "silence"):
                no_params(cmd, params)
                self.change(phase=cmd)
            elif cmd == "rate":
                self.change(rate=one_number(cmd, params, 0.1, 20, "HZ"))
            elif cmd == "skew":
                self.change(skew=one_number(cmd, params, -10 * 365 * 86400, 10 * 365 * 86400,
                                            "SECONDS"))
            elif cmd == "error":
                self.change(error=one_number(cmd, params, 0.01, 999, "METRES"))
            elif cmd == "kill-gpsd":
                no_params(cmd, params)
                self.gpsd.kill()
            elif cmd == "stop-gpsd":
                no_params(cmd, params)
                self.gpsd.stop(signal.SIGTERM)
            elif cmd == "start-gpsd":
                no_params(cmd, params)
                self.start_gpsd()
            elif cmd == "status":
                no_params(cmd, params)
                return "OK status " + self.status()
            elif cmd == "quit":
                raise SystemExit(0)
            else:
                raise RigError("unknown command %r" % cmd)
        except RigError as e:
            return "ERR %s: %s" % (cmd, e)
        return "OK " + " ".join(words)

    def change(self, **fields):
        if not self.writer.change(**fields):
            raise RigError("the NMEA writer did not pick up the change within %.0f s"
                           % APPLY_TIMEOUT)


def number(text, low, high):
    try:
        value = float(text)
    except ValueError:
        raise RigError("not a number: %r" % text)
    if not (math.isfinite(value) and low <= value <= high):
        raise RigError("%s is outside %g..%g" % (text, low, high))
    return value


def one_number(cmd, params, low, high, name):
    if len(params) != 1:
        raise RigError("usage: %s %s" % (cmd, name))
    return number(params[0], low, high)


def no_params(cmd, params):
    if params:
        raise RigError("%s takes no arguments" % cmd)


def reply(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="gpsd TCP port; 0 picks a free one")
    parser.add_argument("--rate", type=float, default=1.0, help="NMEA cycles per second")
    parser.add_argument("--lat", type=float, default=59.3293)
    parser.add_argument("--lon", type=float, default=18.0686)
    parser.add_argument("--error", type=float, default=5.0, help="horizontal error (eph), metres")
    parser.add_argument("--no-gpsd", action="store_true",
                        help="do not start gpsd (start-gpsd starts it later)")
    parser.add_argument("--gpsd", default=shutil.which("gpsd", path="/usr/sbin:/usr/bin:/sbin")
                        or "/usr/sbin/gpsd", help="gpsd binary")
    parser.add_argument("--gpsd-debug", type=int, default=0, help="gpsd -D level (to its log)")
    args = parser.parse_args()
    limits = [("--rate", args.rate, 0.1, 20), ("--lat", args.lat, -90, 90),
              ("--lon", args.lon, -180, 180), ("--error", args.error, 0.01, 999),
              ("--port", args.port, 0, 65535)]
    for name, value, low, high in limits:
        if not low <= value <= high:
            parser.error("%s must be within %g..%g" % (name, low, high))
    parent = os.getppid()

    # Signals only set a flag and wake the select() below, so teardown always runs on the main
    # thread, between commands, never in the middle of one.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    got_signal = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: got_signal.append(signum))

    rig = Rig(args)
    atexit.register(rig.close)
    try:
        rig.start()
    except (RigError, OSError) as e:
        reply("ERR start: %s" % e)
        return 1
    if got_signal:  # told to stop while gpsd was starting
        return 0
    reply("READY port=%d pty=%s" % (rig.gpsd.port, rig.tty_path))

    stdin_fd = sys.stdin.fileno()
    pending = b""
    while not got_signal:
        ready, _, _ = select.select([stdin_fd, wake_r], [], [], 1.0)
        if os.getppid() != parent:  # our parent died; stdin may still be held open by others
            log("parent process went away; quitting")
            break
        rig.gpsd.reap()
        if stdin_fd not in ready:
            continue
        chunk = os.read(stdin_fd, 4096)
        if not chunk:  # EOF: the test closed our stdin or died
            break
        pending += chunk
        while b"\n" in pending:
            raw, pending = pending.split(b"\n", 1)
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                answer = rig.handle(line)
            except SystemExit:
                rig.close()
                reply("OK quit")
                return 0
            reply(answer)
    rig.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the test stopped reading our stdout; nothing left to tell it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no 2nd error at exit
        sys.exit(0)
