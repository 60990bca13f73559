#!/usr/bin/python3
"""powercutfs: a FUSE file system that forgets what was never fsynced, for power-cut tests.

    powercutfs.py BACKING MOUNTPOINT [--harsh] [--seed S] [--cut-on EVENT[:NAME]:N]

It serves a tree whose *durable* state lives in BACKING (`meta.json`: the directories' synced entries and
inode attributes; `data/INO`: each file's synced bytes) and whose *current* state lives in this process's
memory, as a disk's volatile cache would. The rules, strict fsync(2) semantics:

- A write (or truncate) reaches the durable state only when its file is fsynced (fsync and fdatasync alike).
- A new, removed or renamed name reaches it only when its directory is fsynced; until then a created file
  may vanish and a rename or unlink may be undone, however often the file itself was fsynced. A new
  directory's entries are durable only once the new directory itself is fsynced, and its own name only once
  its parent is.
- A power cut (SIGUSR1, or the --cut-on trigger) throws the current state away and exits at once; the
  mount is left dead (ENOTCONN) until it is unmounted (`umount -l`). Mounting BACKING again shows the
  durable state, with files no durable name reaches removed.
- With --harsh the cut is a bad disk's: each pending write of each file, in order, is kept, dropped or torn
  at a random 512-byte sector boundary (the part before or after it reaches the disk), each pending truncate
  kept or dropped, and each directory's pending entries all kept or all dropped; seeded by --seed.
- SIGTERM is a clean shutdown: everything pending becomes durable, then the file system unmounts.
- SIGUSR2 makes it a failing disk: every operation that would change something (write, truncate, fsync,
  create, mkdir, rename, unlink, fsyncdir) fails with EIO, reads still work; SIGHUP makes it well again.

--cut-on cuts the power by itself at a chosen moment, before the operation that triggers it is applied:
EVENT is mkdir, create, write, truncate, fsync, fsyncdir, rename or unlink, NAME an optional suffix the file's name
must end with (`write:.sqlite:3` is the third write to a file named *.sqlite, in WAL mode a checkpoint),
N the count. Each cut appends one line to BACKING/cuts.log: the reason and how many pending writes were
dropped, kept or torn. Prints READY once mounted. Hard links, symlinks and device nodes are not supported.
"""
import argparse
import errno
import json
import os
import random
import signal
import stat
import sys
import time

import pyfuse3
import trio

SECTOR = 512
# A file with more pending writes than this (SQLite's -shm, written through mmap and never fsynced) has
# them merged into one write per dirty run of sectors, so memory stays bounded; --harsh then tears runs.
MERGE_AT = 4096


class Inode:
    def __init__(self, ino, kind, mode, uid=0, gid=0):
        self.ino, self.kind, self.mode, self.uid, self.gid = ino, kind, mode, uid, gid
        self.nlink = 2 if kind == "dir" else 0
        now = time.time_ns()
        self.atime = self.mtime = self.ctime = now
        self.data = bytearray()  # files: the current content
        self.pending = []  # files: ("w", offset, bytes) and ("t", size) not yet fsynced, in order
        self.entries = {}  # dirs: the current name -> ino
        self.durable_entries = {}  # dirs: name -> ino as of the last fsync of this directory

    def attrs(self):
        a = pyfuse3.EntryAttributes()
        a.st_ino = self.ino
        a.generation = 0
        a.entry_timeout = 60
        a.attr_timeout = 60
        a.st_mode = self.mode
        a.st_nlink = max(self.nlink, 1) if self.kind == "dir" else self.nlink
        a.st_uid, a.st_gid = self.uid, self.gid
        a.st_rdev = 0
        a.st_size = len(self.data)
        a.st_blksize = 4096
        a.st_blocks = (len(self.data) + 511) // 512
        a.st_atime_ns, a.st_mtime_ns, a.st_ctime_ns = self.atime, self.mtime, self.ctime
        return a


def fuse_error(code):
    return pyfuse3.FUSEError(code)


class PowerCutFS(pyfuse3.Operations):
    enable_writeback_cache = False  # every write() must reach us: the cache to drop is ours, not the kernel's

    def __init__(self, backing, harsh=False, seed=0, cut_on=None, keep_cache=False):
        super().__init__()
        # Whether an open keeps the kernel's cached pages of the file (as a local file system does) or drops them.
        self.keep_cache = keep_cache
        self.backing = backing
        self.harsh = harsh
        self.rng = random.Random(seed)
        self.cut_on = cut_on  # (event, suffix or None, n)
        self.failing = False  # SIGUSR2: every change fails with EIO (a failing disk); SIGHUP: well again
        self.events = 0
        self.inodes = {}
        self.handles = {}  # fh -> ino
        self.next_fh = 1
        self.durable_attrs = {}  # ino -> (kind, mode, uid, gid) as last written to meta.json
        os.makedirs(os.path.join(backing, "data"), exist_ok=True)
        self.load()

    # ---- the durable state -------------------------------------------------------------------

    def data_path(self, ino):
        return os.path.join(self.backing, "data", str(ino))

    def load(self):
        meta_path = os.path.join(self.backing, "meta.json")
        meta = {"inodes": {}, "entries": {}, "next_ino": pyfuse3.ROOT_INODE + 1}
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                meta = json.load(f)
        attrs = {int(k): v for k, v in meta["inodes"].items()}
        attrs.setdefault(pyfuse3.ROOT_INODE, ["dir", stat.S_IFDIR | 0o755, 0, 0])
        entries = {int(k): {n.encode("latin-1"): i for n, i in v.items()} for k, v in meta["entries"].items()}
        # Only what a durable name reaches survives; an fsynced file whose name never did is gone.
        reachable, todo = set(), [pyfuse3.ROOT_INODE]
        while todo:
            ino = todo.pop()
            if ino in reachable or ino not in attrs:
                continue
            reachable.add(ino)
            todo.extend(entries.get(ino, {}).values())
        for ino in sorted(reachable):
            kind, mode, uid, gid = attrs[ino]
            node = Inode(ino, kind, mode, uid, gid)
            if kind == "dir":
                node.entries = {n: i for n, i in entries.get(ino, {}).items() if i in reachable}
                node.durable_entries = dict(node.entries)
            elif os.path.exists(self.data_path(ino)):
                with open(self.data_path(ino), "rb") as f:
                    node.data = bytearray(f.read())
            self.inodes[ino] = node
            self.durable_attrs[ino] = (kind, mode, uid, gid)
        for node in list(self.inodes.values()):
            for child in node.entries.values():
                c = self.inodes[child]
                if c.kind == "dir":
                    node.nlink += 1
                else:
                    c.nlink += 1
        for name in os.listdir(os.path.join(self.backing, "data")):
            if int(name) not in reachable:
                os.unlink(self.data_path(int(name)))
        self.next_ino = max([meta["next_ino"], *reachable]) + 1
        self.write_meta()

    def write_meta(self):
        """The synced directory entries and the attributes of every inode they reach, replaced atomically."""
        live = {ino for ino, node in self.inodes.items() if node.kind == "dir"}
        referenced = {pyfuse3.ROOT_INODE}
        for ino in live:
            referenced.update(self.inodes[ino].durable_entries.values())
        inodes = {}
        for ino in referenced:
            if ino in self.inodes:
                n = self.inodes[ino]
                self.durable_attrs.setdefault(ino, (n.kind, n.mode, n.uid, n.gid))
            if ino in self.durable_attrs:
                inodes[str(ino)] = list(self.durable_attrs[ino])
        meta = {
            "next_ino": self.next_ino,
            "inodes": inodes,
            "entries": {str(ino): {n.decode("latin-1"): i for n, i in self.inodes[ino].durable_entries.items()}
                        for ino in live if str(ino) in inodes},
        }
        tmp = os.path.join(self.backing, "meta.json.tmp")
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, os.path.join(self.backing, "meta.json"))

    def apply(self, ino, ops):
        """Writes `ops` (pending writes and truncates) to the durable copy of file `ino`."""
        if not ops:
            return
        fd = os.open(self.data_path(ino), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            for op in ops:
                if op[0] == "w":
                    os.pwrite(fd, op[2], op[1])
                else:
                    os.ftruncate(fd, op[1])
        finally:
            os.close(fd)

    def sync_file(self, node):
        self.apply(node.ino, node.pending)
        node.pending = []
        if self.durable_attrs.get(node.ino, (None, node.mode, node.uid, node.gid))[1:] != (node.mode, node.uid, node.gid):
            self.durable_attrs[node.ino] = (node.kind, node.mode, node.uid, node.gid)
            self.write_meta()

    def sync_dir(self, node):
        node.durable_entries = dict(node.entries)
        for ino in node.entries.values():
            child = self.inodes[ino]
            self.durable_attrs[ino] = (child.kind, child.mode, child.uid, child.gid)
        self.durable_attrs[node.ino] = (node.kind, node.mode, node.uid, node.gid)
        self.write_meta()

    def sync_all(self):
        for node in self.inodes.values():
            if node.kind == "file":
                self.sync_file(node)
        for node in self.inodes.values():
            if node.kind == "dir":
                node.durable_entries = dict(node.entries)
                self.durable_attrs[node.ino] = (node.kind, node.mode, node.uid, node.gid)
        self.write_meta()

    # ---- the power cut -----------------------------------------------------------------------

    def torn(self, op):
        """A pending write torn at a random sector boundary inside it: the part before or after it lands."""
        _, off, data = op
        first = (off // SECTOR + 1) * SECTOR
        bounds = list(range(first, off + len(data), SECTOR))
        if not bounds:
            return None
        cut = self.rng.choice(bounds) - off
        return ("w", off, data[:cut]) if self.rng.random() < 0.5 else ("w", off + cut, data[cut:])

    def power_cut(self, reason):
        """Drops (or, harsh, keeps/drops/tears) everything pending, records why, and exits at once."""
        counts = {"dropped": 0, "kept": 0, "torn": 0, "dirsKept": 0, "dirsDropped": 0}
        # When the power went (wall clock, as crash reports' files are stamped): a process that touches the mount
        # from here on may fault (SIGBUS on a page of a mapped file), which a real power cut would never show.
        at = time.time()
        if self.harsh:
            for node in sorted(self.inodes.values(), key=lambda n: n.ino):
                if node.kind == "file" and node.pending:
                    landed = []
                    for op in node.pending:
                        roll = self.rng.random()
                        t = self.torn(op) if op[0] == "w" and roll < 1 / 3 else None
                        if t is not None:
                            landed.append(t)
                            counts["torn"] += 1
                        elif roll < 2 / 3:
                            landed.append(op)
                            counts["kept"] += 1
                        else:
                            counts["dropped"] += 1
                    self.apply(node.ino, landed)
                elif node.kind == "dir" and node.entries != node.durable_entries:
                    if self.rng.random() < 0.5:
                        self.sync_dir(node)
                        counts["dirsKept"] += 1
                    else:
                        counts["dirsDropped"] += 1
        else:
            for node in self.inodes.values():
                if node.kind == "file":
                    counts["dropped"] += len(node.pending)
                elif node.entries != node.durable_entries:
                    counts["dirsDropped"] += 1
        with open(os.path.join(self.backing, "cuts.log"), "a") as f:
            f.write(json.dumps({"reason": reason, "harsh": self.harsh, "at": at, **counts}) + "\n")
        sys.stderr.write(f"powercutfs: power cut ({reason}): {counts}\n")
        sys.stderr.flush()
        os._exit(0)

    def event(self, kind, name=b"", ino=None):
        """Counts an operation toward the --cut-on trigger; cuts the power before it is applied. The name of
        a file operation (`ino`) is looked up only when a trigger is armed. A failing disk refuses it (EIO)."""
        if self.failing:
            raise fuse_error(errno.EIO)
        if not self.cut_on:
            return
        want, suffix, n = self.cut_on
        if ino is not None:
            name = self.name_of(ino)
        if want == kind and (suffix is None or name.endswith(suffix)):
            self.events += 1
            if self.events >= n:
                self.power_cut(f"{kind} {name.decode('latin-1')} #{self.events}")

    # ---- helpers -----------------------------------------------------------------------------

    def node(self, ino):
        try:
            return self.inodes[ino]
        except KeyError:
            raise fuse_error(errno.ENOENT)

    def name_of(self, ino):
        for parent in self.inodes.values():
            for n, i in parent.entries.items():
                if i == ino:
                    return n
        return b""

    def new_inode(self, parent, name, kind, mode, ctx):
        d = self.node(parent)
        if name in d.entries:
            raise fuse_error(errno.EEXIST)
        node = Inode(self.next_ino, kind, mode, ctx.uid, ctx.gid)
        self.next_ino += 1
        self.inodes[node.ino] = node
        d.entries[name] = node.ino
        if kind == "dir":
            d.nlink += 1
        else:
            node.nlink = 1
        d.mtime = d.ctime = time.time_ns()
        return node

    def write_op(self, node, op):
        if op[0] == "w":
            _, off, data = op
            if off > len(node.data):
                node.data.extend(b"\0" * (off - len(node.data)))
            node.data[off:off + len(data)] = data
        else:
            size = op[1]
            if size < len(node.data):
                del node.data[size:]
            else:
                node.data.extend(b"\0" * (size - len(node.data)))
        node.pending.append(op)
        if len(node.pending) > MERGE_AT:
            self.merge_pending(node)
        node.mtime = node.ctime = time.time_ns()

    def merge_pending(self, node):
        """Replaces many pending ops by one truncate and one write per dirty run of sectors, same outcome."""
        dirty, size = set(), None
        for op in node.pending:
            if op[0] == "w":
                dirty.update(range(op[1] // SECTOR, (op[1] + len(op[2]) + SECTOR - 1) // SECTOR))
            else:
                size = op[1]
                dirty.add(op[1] // SECTOR)
        merged = [] if size is None else [("t", len(node.data))]
        run = []
        for s in sorted(dirty) + [None]:
            if run and (s is None or s != run[-1] + 1):
                lo, hi = run[0] * SECTOR, min((run[-1] + 1) * SECTOR, len(node.data))
                if lo < hi:
                    merged.append(("w", lo, bytes(node.data[lo:hi])))
                run = []
            if s is not None:
                run.append(s)
        node.pending = merged

    # ---- FUSE operations ---------------------------------------------------------------------

    async def lookup(self, parent_inode, name, ctx=None):
        d = self.node(parent_inode)
        if name == b".":
            return d.attrs()
        if name == b"..":
            for p in self.inodes.values():
                if parent_inode in p.entries.values():
                    return p.attrs()
            return d.attrs()
        if name not in d.entries:
            raise fuse_error(errno.ENOENT)
        return self.inodes[d.entries[name]].attrs()

    async def getattr(self, inode, ctx=None):
        return self.node(inode).attrs()

    async def setattr(self, inode, attr, fields, fh, ctx):
        node = self.node(inode)
        if fields.update_size:
            if node.kind == "dir":
                raise fuse_error(errno.EISDIR)
            self.event("truncate", ino=inode)
            self.write_op(node, ("t", attr.st_size))
        if fields.update_mode:
            node.mode = (node.mode & ~0o7777) | (attr.st_mode & 0o7777)
        if fields.update_uid:
            node.uid = attr.st_uid
        if fields.update_gid:
            node.gid = attr.st_gid
        if fields.update_atime:
            node.atime = attr.st_atime_ns
        if fields.update_mtime:
            node.mtime = attr.st_mtime_ns
        node.ctime = time.time_ns()
        return node.attrs()

    async def opendir(self, inode, ctx):
        if self.node(inode).kind != "dir":
            raise fuse_error(errno.ENOTDIR)
        return inode

    async def readdir(self, fh, start_id, token):
        d = self.node(fh)
        names = sorted(d.entries)
        for i, name in enumerate(names[start_id:], start_id + 1):
            if not pyfuse3.readdir_reply(token, name, self.inodes[d.entries[name]].attrs(), i):
                break

    async def releasedir(self, fh):
        pass

    async def fsyncdir(self, fh, datasync):
        d = self.node(fh)
        self.event("fsyncdir", ino=fh)
        self.sync_dir(d)

    async def mkdir(self, parent_inode, name, mode, ctx):
        self.event("mkdir", name)
        return self.new_inode(parent_inode, name, "dir", stat.S_IFDIR | (mode & 0o7777), ctx).attrs()

    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        if not stat.S_ISREG(mode):
            raise fuse_error(errno.EPERM)
        self.event("create", name)
        return self.new_inode(parent_inode, name, "file", mode, ctx).attrs()

    async def create(self, parent_inode, name, mode, flags, ctx):
        self.event("create", name)
        node = self.new_inode(parent_inode, name, "file", stat.S_IFREG | (mode & 0o7777), ctx)
        return self.open_handle(node), node.attrs()

    def open_handle(self, node):
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = node.ino
        return pyfuse3.FileInfo(fh=fh, keep_cache=self.keep_cache)

    async def open(self, inode, flags, ctx):
        node = self.node(inode)
        if node.kind == "dir":
            raise fuse_error(errno.EISDIR)
        if flags & os.O_TRUNC and node.data:
            if self.failing:
                raise fuse_error(errno.EIO)
            self.write_op(node, ("t", 0))
        return self.open_handle(node)

    async def read(self, fh, off, size):
        node = self.node(self.handles[fh])
        return bytes(node.data[off:off + size])

    async def write(self, fh, off, buf):
        node = self.node(self.handles[fh])
        self.event("write", ino=node.ino)
        self.write_op(node, ("w", off, bytes(buf)))
        return len(buf)

    async def fsync(self, fh, datasync):
        node = self.node(self.handles[fh])
        self.event("fsync", ino=node.ino)
        self.sync_file(node)

    async def flush(self, fh):
        pass

    async def release(self, fh):
        self.handles.pop(fh, None)

    async def unlink(self, parent_inode, name, ctx):
        d = self.node(parent_inode)
        if name not in d.entries:
            raise fuse_error(errno.ENOENT)
        child = self.inodes[d.entries[name]]
        if child.kind == "dir":
            raise fuse_error(errno.EISDIR)
        self.event("unlink", name)
        del d.entries[name]
        child.nlink -= 1
        d.mtime = d.ctime = child.ctime = time.time_ns()

    async def rmdir(self, parent_inode, name, ctx):
        d = self.node(parent_inode)
        if name not in d.entries:
            raise fuse_error(errno.ENOENT)
        child = self.inodes[d.entries[name]]
        if child.kind != "dir":
            raise fuse_error(errno.ENOTDIR)
        if child.entries:
            raise fuse_error(errno.ENOTEMPTY)
        self.event("unlink", name)
        del d.entries[name]
        d.nlink -= 1
        d.mtime = d.ctime = time.time_ns()

    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise fuse_error(errno.EINVAL)
        old, new = self.node(parent_inode_old), self.node(parent_inode_new)
        if name_old not in old.entries:
            raise fuse_error(errno.ENOENT)
        moving = self.inodes[old.entries[name_old]]
        if name_new in new.entries:
            if flags & pyfuse3.RENAME_NOREPLACE:
                raise fuse_error(errno.EEXIST)
            target = self.inodes[new.entries[name_new]]
            if target.ino == moving.ino:
                return
            if target.kind == "dir":
                if moving.kind != "dir":
                    raise fuse_error(errno.EISDIR)
                if target.entries:
                    raise fuse_error(errno.ENOTEMPTY)
                new.nlink -= 1
            elif moving.kind == "dir":
                raise fuse_error(errno.ENOTDIR)
            else:
                target.nlink -= 1
        self.event("rename", name_new)
        del old.entries[name_old]
        new.entries[name_new] = moving.ino
        if moving.kind == "dir" and old is not new:
            old.nlink -= 1
            new.nlink += 1
        now = time.time_ns()
        old.mtime = old.ctime = new.mtime = new.ctime = moving.ctime = now

    async def link(self, inode, new_parent_inode, new_name, ctx):
        raise fuse_error(errno.EPERM)

    async def symlink(self, parent_inode, name, target, ctx):
        raise fuse_error(errno.EPERM)

    async def access(self, inode, mode, ctx):
        return True

    async def statfs(self, ctx):
        s = pyfuse3.StatvfsData()
        v = os.statvfs(self.backing)
        s.f_bsize, s.f_frsize = v.f_bsize, v.f_frsize
        s.f_blocks, s.f_bfree, s.f_bavail = v.f_blocks, v.f_bfree, v.f_bavail
        s.f_files, s.f_ffree, s.f_favail = v.f_files, v.f_ffree, v.f_favail
        s.f_namemax = 255
        return s


def parse_cut_on(text):
    parts = text.split(":")
    if len(parts) == 2:
        return parts[0], None, int(parts[1])
    if len(parts) == 3:
        return parts[0], parts[1].encode(), int(parts[2])
    raise argparse.ArgumentTypeError("--cut-on EVENT[:SUFFIX]:N")


async def serve(fs):
    async with trio.open_nursery() as nursery:
        async def signals():
            with trio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGTERM,
                                           signal.SIGINT) as received:
                async for signum in received:
                    if signum in (signal.SIGUSR2, signal.SIGHUP):
                        fs.failing = signum == signal.SIGUSR2
                        sys.stderr.write(f"powercutfs: {'failing' if fs.failing else 'well again'}\n")
                        sys.stderr.flush()
                        continue
                    if signum == signal.SIGUSR1:
                        fs.power_cut("SIGUSR1")
                    fs.sync_all()
                    pyfuse3.terminate()
                    nursery.cancel_scope.cancel()
                    return
        nursery.start_soon(signals)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    ap.add_argument("--harsh", action="store_true", help="keep, drop or tear each pending write on a cut")
    ap.add_argument("--seed", type=int, default=0, help="seeds the harsh cut's choices")
    ap.add_argument("--cut-on", type=parse_cut_on, default=None, help="EVENT[:SUFFIX]:N, cut by itself")
    ap.add_argument("--keep-cache", action="store_true",
                    help="an open keeps the file's cached pages, as a local file system does (a failing disk needs it: "
                         "dropping them would drop what a process wrote through a shared mapping, such as SQLite's "
                         "-shm, when its write-back failed)")
    args = ap.parse_args()
    # A parent may have left these blocked (Foundation's Process does): the cut and the clean stop need them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGTERM,
                                                signal.SIGINT})
    fs = PowerCutFS(args.backing, harsh=args.harsh, seed=args.seed, cut_on=args.cut_on, keep_cache=args.keep_cache)
    options = set(pyfuse3.default_options)
    options.update(["fsname=powercutfs", "allow_other"])
    pyfuse3.init(fs, args.mountpoint, options)
    print("READY", flush=True)
    try:
        trio.run(serve, fs)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
