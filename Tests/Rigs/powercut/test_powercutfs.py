"""powercutfs's own tests: what survives a power cut under strict fsync(2) semantics, and the harsh cut.

    /usr/bin/python3 -m unittest Tests/Rigs/powercut/test_powercutfs.py    (as root: it mounts FUSE)

Expected outcomes come from fsync(2) (POSIX and Linux man pages): fsync makes a file's data durable, not its
directory entry, which needs an fsync of the directory; nothing else is promised.
"""
import json
import errno
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mount import PowerCutMount  # noqa: E402

SECTOR = 512


def write_file(path, data, sync=False, mode="wb"):
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class PowerCutFSTests(unittest.TestCase):
    harsh = False

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="powercutfs-test.")
        self.fs = PowerCutMount(os.path.join(self.work, "backing"), os.path.join(self.work, "mnt"),
                                harsh=self.harsh, seed=42,
                                errfile=os.path.join(self.work, "fs.err"))
        self.fs.mount()
        self.m = self.fs.mountpoint

    def tearDown(self):
        self.fs.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def cut_and_remount(self, cut_on=None):
        self.fs.cut()
        self.fs.mount(cut_on=cut_on)

    def p(self, *names):
        return os.path.join(self.m, *names)

    def test_write_without_fsync_is_gone_after_a_cut(self):
        write_file(self.p("f"), b"old", sync=True)
        sync_dir(self.m)
        write_file(self.p("f"), b"new and longer")
        self.assertEqual(read(self.p("f")), b"new and longer")  # readable before the cut
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"old")

    def test_write_with_fsync_stays(self):
        write_file(self.p("f"), b"old", sync=True)
        sync_dir(self.m)
        write_file(self.p("f"), b"new and longer", sync=True)
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"new and longer")

    def test_fdatasync_is_enough_for_data(self):
        write_file(self.p("f"), b"", sync=True)
        sync_dir(self.m)
        with open(self.p("f"), "wb") as f:
            f.write(b"data")
            f.flush()
            os.fdatasync(f.fileno())
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"data")

    def test_new_file_fsynced_but_directory_not_is_gone(self):
        write_file(self.p("f"), b"synced data", sync=True)
        self.cut_and_remount()
        self.assertFalse(os.path.exists(self.p("f")))

    def test_new_file_with_directory_fsync_stays(self):
        write_file(self.p("f"), b"synced data", sync=True)
        sync_dir(self.m)
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"synced data")

    def test_directory_fsync_alone_keeps_the_name_not_the_data(self):
        write_file(self.p("f"), b"never synced")
        sync_dir(self.m)
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"")

    def test_rename_without_directory_fsync_is_undone(self):
        write_file(self.p("config"), b"v1", sync=True)
        sync_dir(self.m)
        write_file(self.p("config.tmp"), b"v2", sync=True)
        os.rename(self.p("config.tmp"), self.p("config"))
        self.assertEqual(read(self.p("config")), b"v2")
        self.cut_and_remount()
        self.assertEqual(read(self.p("config")), b"v1")
        self.assertFalse(os.path.exists(self.p("config.tmp")))

    def test_atomic_replace_with_directory_fsync_stays(self):
        write_file(self.p("config"), b"v1", sync=True)
        sync_dir(self.m)
        write_file(self.p("config.tmp"), b"v2", sync=True)
        os.rename(self.p("config.tmp"), self.p("config"))
        sync_dir(self.m)
        self.cut_and_remount()
        self.assertEqual(read(self.p("config")), b"v2")
        self.assertEqual(sorted(os.listdir(self.m)), ["config"])

    def test_unlink_without_directory_fsync_is_undone(self):
        write_file(self.p("f"), b"kept", sync=True)
        sync_dir(self.m)
        os.unlink(self.p("f"))
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"kept")

    def test_new_directory_needs_its_parent_fsynced(self):
        # mkdir -p a/b, a synced file in b, b synced: without a fsync of a and of the root, all is gone.
        os.makedirs(self.p("a", "b"))
        write_file(self.p("a", "b", "f"), b"x", sync=True)
        sync_dir(self.p("a", "b"))
        self.cut_and_remount()
        self.assertFalse(os.path.exists(self.p("a")))
        os.makedirs(self.p("a", "b"))
        write_file(self.p("a", "b", "f"), b"x", sync=True)
        for d in (self.p("a", "b"), self.p("a"), self.m):
            sync_dir(d)
        self.cut_and_remount()
        self.assertEqual(read(self.p("a", "b", "f")), b"x")

    def test_truncate_without_fsync_is_undone(self):
        write_file(self.p("f"), b"0123456789", sync=True)
        sync_dir(self.m)
        os.truncate(self.p("f"), 3)
        self.assertEqual(read(self.p("f")), b"012")
        self.cut_and_remount()
        self.assertEqual(read(self.p("f")), b"0123456789")

    def test_clean_shutdown_syncs_everything(self):
        os.makedirs(self.p("d"))
        write_file(self.p("d", "f"), b"unsynced but clean")
        self.fs.stop()
        self.fs.mount()
        self.assertEqual(read(self.p("d", "f")), b"unsynced but clean")

    def test_cut_on_trigger_cuts_before_the_nth_write(self):
        write_file(self.p("f.db"), b"", sync=True)
        sync_dir(self.m)
        self.fs.stop()
        self.fs.mount(cut_on="write:.db:3")
        fd = os.open(self.p("f.db"), os.O_WRONLY)
        os.write(fd, b"a" * 10)
        os.fsync(fd)
        os.pwrite(fd, b"b" * 10, 10)
        os.fsync(fd)
        with self.assertRaises(OSError):  # the third write meets a dead disk
            os.pwrite(fd, b"c" * 10, 20)
            os.fsync(fd)
        try:
            os.close(fd)
        except OSError:  # ENOTCONN: the disk is gone
            pass
        self.fs.proc.wait()
        self.assertIn("write f.db #3", self.fs.last_cut())
        self.fs.detach()
        self.fs.mount()
        self.assertEqual(read(self.p("f.db")), b"a" * 10 + b"b" * 10)

    def test_a_failing_disk_refuses_changes_with_eio_and_reads_go_on(self):
        write_file(self.p("kept"), b"before", sync=True)
        self.fs.fail_writes(True)
        for change in (lambda: write_file(self.p("kept"), b"after"), lambda: write_file(self.p("new"), b"x"),
                       lambda: os.rename(self.p("kept"), self.p("moved")), lambda: os.mkdir(self.p("d"))):
            with self.assertRaises(OSError) as caught:
                change()
            self.assertEqual(caught.exception.errno, errno.EIO)
        self.assertEqual(read(self.p("kept")), b"before")
        self.fs.fail_writes(False)
        write_file(self.p("kept"), b"after", sync=True)
        self.assertEqual(read(self.p("kept")), b"after")

    def test_sqlite_wal_commits_survive_with_synchronous_full_only(self):
        def commit_rows(sync, first):
            db = sqlite3.connect(self.p("spool.sqlite"), isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={sync}")
            db.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
            for n in range(first, first + 50):
                db.execute("INSERT INTO t VALUES (?)", (n,))
            return db  # left open: the cut comes before any checkpoint on close

        db = commit_rows("FULL", 0)
        self.cut_and_remount()
        db.close()
        db = sqlite3.connect(self.p("spool.sqlite"))
        self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        self.assertEqual(db.execute("SELECT COUNT(*) FROM t").fetchone()[0], 50)
        db.close()
        db = commit_rows("OFF", 50)
        self.cut_and_remount()
        db.close()
        db = sqlite3.connect(self.p("spool.sqlite"))
        self.assertEqual(db.execute("SELECT COUNT(*) FROM t").fetchone()[0], 50)  # the OFF commits are gone
        db.close()


class HarshCutTests(unittest.TestCase):
    def run_harsh(self, seed):
        work = tempfile.mkdtemp(prefix="powercutfs-harsh.")
        try:
            fs = PowerCutMount(os.path.join(work, "b"), os.path.join(work, "m"), harsh=True, seed=seed,
                                errfile=os.path.join(work, "fs.err"))
            fs.mount()
            path = os.path.join(fs.mountpoint, "f")
            old = bytes([0xAA]) * (64 * 4096)
            write_file(path, old, sync=True)
            sync_dir(fs.mountpoint)
            fd = os.open(path, os.O_WRONLY)
            for i in range(64):  # 64 pending page writes, each of its own byte
                os.pwrite(fd, bytes([i]) * 4096, i * 4096)
            os.close(fd)
            fs.cut()
            fs.mount()
            after = read(path)
            fs.stop()
            cut = json.loads(fs.last_cut() or "{}")
            cut.pop("at", None)  # when the power went: the one field a seed does not decide
            return after, cut
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def test_each_pending_write_is_kept_dropped_or_torn_at_a_sector_boundary(self):
        after, _ = self.run_harsh(7)
        self.assertEqual(len(after), 64 * 4096)
        outcomes = set()
        for i in range(64):
            page = after[i * 4096:(i + 1) * 4096]
            sectors = [page[s:s + SECTOR] for s in range(0, 4096, SECTOR)]
            kinds = []
            for s in sectors:
                # A sector is wholly old or wholly new: never garbled inside.
                self.assertIn(s, (bytes([0xAA]) * SECTOR, bytes([i]) * SECTOR), f"page {i}")
                kinds.append("new" if s[0] == i else "old")
            runs = [k for j, k in enumerate(kinds) if j == 0 or kinds[j - 1] != k]
            self.assertLessEqual(len(runs), 2, f"page {i}: one tear at most, got {kinds}")
            outcomes.add("kept" if runs == ["new"] else "dropped" if runs == ["old"] else "torn")
        self.assertEqual(outcomes, {"kept", "dropped", "torn"})

    def test_harsh_cut_is_reproducible_from_its_seed(self):
        a, log_a = self.run_harsh(11)
        b, log_b = self.run_harsh(11)
        c, _ = self.run_harsh(12)
        self.assertEqual(a, b)
        self.assertEqual(log_a, log_b)
        self.assertNotEqual(a, c)


if __name__ == "__main__":
    unittest.main()
