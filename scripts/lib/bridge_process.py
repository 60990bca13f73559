"""Bridge processes started by the test harnesses (scripts/powercut, scripts/soak, the gate box), and the crash
reports of those that die of a signal.

Why a module of its own: when a Swift program gets a fatal signal, its runtime starts `swift-backtrace`, which
inherits the program's standard output and error. A harness that then SIGKILLs the program (a power cut, a
fault) orphans the backtracer, still waiting on its socket to the dead process and still holding the pipes, so a
`communicate()` on them never sees the end (issue 46: a power-cut run stood still until CI's limit). So:

- every bridge starts in a process group of its own (`start_new_session`), and is killed with its group, which
  takes its backtracer with it (the backtracer joins its parent's group; it never starts one of its own);
- every bridge gets `SWIFT_BACKTRACE` explicitly: not interactive, no symbol lookup (the report is written within
  milliseconds, before anything can kill it), written to a file in a directory of the harness, never to the pipes;
- every wait is bounded;
- `CrashReports` reads what the backtracer wrote: the signal, the process, the frames of the crashed thread with
  the image each lies in, symbolicated afterwards from the images' symbol tables.
"""
import os
import re
import shutil
import signal
import subprocess

SIGNAL_NAMES = {
    # The runtime's words for each signal (swift-backtrace's "*** Program crashed: <words> at <address> ***").
    "Bus error": "SIGBUS", "Bad pointer dereference": "SIGSEGV", "Segmentation fault": "SIGSEGV", "Illegal instruction": "SIGILL",
    "Aborted": "SIGABRT", "Floating point error": "SIGFPE", "Trace/breakpoint trap": "SIGTRAP",
}


def backtrace_setting(directory):
    """The `SWIFT_BACKTRACE` value for a bridge under a harness: reports as files in `directory`."""
    os.makedirs(directory, exist_ok=True)
    return f"enable=yes,interactive=no,symbolicate=off,threads=crashed,output-to={directory}"


def environment(crash_directory, base=None):
    """`base` (default: this process's environment) with the harness's `SWIFT_BACKTRACE`."""
    env = dict(os.environ if base is None else base)
    env["SWIFT_BACKTRACE"] = backtrace_setting(crash_directory)
    return env


def spawn(argv, crash_directory, env=None, **kwargs):
    """Starts a bridge in a process group of its own, its crash reports going to `crash_directory`."""
    return subprocess.Popen(argv, env=environment(crash_directory, env), start_new_session=True, **kwargs)


def kill_group(process, sig=signal.SIGKILL):
    """Signals the process's whole group (its backtracer included); quiet when the group is gone."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def communicate(process, timeout):
    """`communicate()` bounded by `timeout` s: past it the group is killed, and what was read is returned."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        return process.communicate(timeout=10)


def run(argv, crash_directory, timeout, env=None, input=None):
    """`subprocess.run(argv, capture_output=True, text=True)` for a bridge command, in a group of its own and
    bounded: past `timeout` s the group is killed and `subprocess.TimeoutExpired` raised, as `subprocess.run` does."""
    p = spawn(argv, crash_directory, env=env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        p.communicate(timeout=10)
        raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def fatal_signal(returncode):
    """The name of the signal a reaped process died of (SIGKILL, which the harnesses send, excepted), or None."""
    if returncode is None or returncode >= 0 or returncode == -signal.SIGKILL:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class CrashReport:
    """One report of swift-backtrace (text format, `symbolicate=off`)."""

    FRAME_RE = re.compile(r"^\s*\d+\s+(?:\[\w+\]\s+)*(0x[0-9a-f]+)")
    IMAGE_RE = re.compile(r"^(0x[0-9a-f]+)\S(0x[0-9a-f]+)\s+\S+\s+(\S+)\s+(/\S+)")

    def __init__(self, path):
        self.path = path
        m = re.search(r"-(\d+)-[\d.]+\.log$", path)
        self.pid = int(m.group(1)) if m else None
        with open(path, errors="replace") as f:
            self.text = f.read()
        m = re.search(r"\*\*\* Program crashed: (.+?) at (0x[0-9a-f]+)", self.text)
        self.signal = SIGNAL_NAMES.get(m.group(1), m.group(1)) if m else "unknown"
        self.fault_address = m.group(2) if m else None
        self.images = []  # (start, end, name, path)
        for line in self.text.splitlines():
            im = self.IMAGE_RE.match(line)
            if im:
                self.images.append((int(im.group(1), 16), int(im.group(2), 16), im.group(3), im.group(4)))
        self.frames = []  # addresses of the crashed thread, innermost first
        m = re.search(r"^Thread \d+.* crashed:\n\n(.*?)\n\n", self.text, re.M | re.S)
        for line in (m.group(1) if m else "").splitlines():
            fm = self.FRAME_RE.match(line)
            if fm:
                self.frames.append(int(fm.group(1), 16))

    def image_of(self, address):
        for start, end, name, path in self.images:
            if start <= address < end:
                return name, path, address - start
        return None, None, None

    def symbolicated(self, limit=8):
        """The crashed thread's innermost frames as `symbol in image`, looked up after the fact."""
        out = []
        for n, address in enumerate(self.frames[:limit]):
            # A return address points after the call: look up the byte before it (frame 0 is the faulting pc).
            name, path, offset = self.image_of(address if n == 0 else address - 1)
            out.append(f"{symbol(path, offset) or hex(address)} in {name or '?'}")
        return demangled(out)

    def in_image(self, prefix, depth=4):
        """Whether one of the crashed thread's `depth` innermost frames lies in an image named `prefix*`."""
        return any((self.image_of(a)[0] or "").startswith(prefix) for a in self.frames[:depth])


_symbols = {}


def demangled(lines):
    """Swift names made readable by the toolchain's `swift-demangle`, where it is on the machine."""
    tool = shutil.which("swift-demangle")
    if not tool or not lines:
        return lines
    p = subprocess.run([tool, "--simplified"], input="\n".join(lines), capture_output=True, text=True, timeout=30)
    return p.stdout.splitlines() if p.returncode == 0 and p.stdout.count("\n") >= len(lines) - 1 else lines


def symbol(path, offset):
    """The function at `offset` of the ELF file `path`: its own symbol table, else its dynamic one (Debian's
    libraries are stripped but keep their exported names); None when neither covers it."""
    if not path or offset is None or not os.path.exists(path):
        return None
    if path not in _symbols:
        table = []
        for flag in ([], ["-D"]):
            p = subprocess.run(["nm", "-C", "--defined-only", "-n", *flag, path], capture_output=True, text=True,
                               timeout=60)
            for line in p.stdout.splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3 and parts[1] in "tTwW":
                    table.append((int(parts[0], 16), parts[2]))
            if table:
                break
        _symbols[path] = sorted(table)
    # Position-independent objects link at 0, so a file offset within the text is the symbol's value.
    best = None
    for value, name in _symbols[path]:
        if value > offset:
            break
        best = (value, name)
    return f"{best[1]} + {offset - best[0]}" if best else None


class CrashReports:
    """The reports written into one directory, read as they come."""

    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.seen = set()

    def new(self):
        """Reports written since the last call."""
        found = []
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if name.endswith(".log") and path not in self.seen:
                self.seen.add(path)
                found.append(CrashReport(path))
        return found
