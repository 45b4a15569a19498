import os
import stat
import unittest
import time
from unittest import mock

import gpuguard
from gpuguard import checkpoint as ggcheckpoint

from .support import TmpTestCase, clean_env


class CheckpointTest(TmpTestCase):
    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.dir, "checkpoint")

    def listing(self):
        return sorted(os.listdir(self.dir))

    def test_save_and_load(self):
        self.assertIsNone(gpuguard.load_checkpoint(self.path))
        self.assertEqual(gpuguard.save_checkpoint(b"\x00one", self.path), self.path)
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"\x00one")
        gpuguard.save_checkpoint("twö", self.path)
        self.assertEqual(gpuguard.load_checkpoint(self.path), "twö".encode("utf-8"))
        gpuguard.save_checkpoint(bytearray(b"three"), self.path)
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"three")
        gpuguard.save_checkpoint(lambda f: (f.write(b"fo"), f.write(b"ur")), self.path)
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"four")
        self.assertEqual(self.listing(), ["checkpoint"])  # no temp files left

    def test_env_path(self):
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_CHECKPOINT=self.path):
            self.assertEqual(gpuguard.save_checkpoint(b"x"), self.path)
            self.assertEqual(gpuguard.load_checkpoint(), b"x")
        with clean_env():
            self.assertIsNone(gpuguard.save_checkpoint(b"y"))
            self.assertIsNone(gpuguard.load_checkpoint())
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"x")

    def test_creates_the_directory(self):
        path = os.path.join(self.dir, "sub", "dir", "ck")
        gpuguard.save_checkpoint(b"x", path)
        self.assertEqual(gpuguard.load_checkpoint(path), b"x")

    def test_replaces_never_truncates(self):
        gpuguard.save_checkpoint(b"old", self.path)
        ino = os.stat(self.path).st_ino
        with open(self.path, "rb") as reader:  # e.g. gpuguard copying it to checkpoint.1
            gpuguard.save_checkpoint(b"new", self.path)
            self.assertEqual(reader.read(), b"old")
        self.assertNotEqual(os.stat(self.path).st_ino, ino)
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"new")

    def test_crash_at_rename_keeps_old(self):
        gpuguard.save_checkpoint(b"old", self.path)
        with mock.patch.object(ggcheckpoint.os, "replace", side_effect=OSError(28, "No space left on device")):
            with self.assertRaises(OSError):
                gpuguard.save_checkpoint(b"new" * 1000, self.path)
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"old")
        self.assertEqual(self.listing(), ["checkpoint"])

    def test_crash_mid_write_keeps_old(self):
        gpuguard.save_checkpoint(b"old", self.path)

        def writer(f):
            f.write(b"half of the new")
            raise KeyboardInterrupt  # killed mid-write
        with self.assertRaises(KeyboardInterrupt):
            gpuguard.save_checkpoint(writer, self.path)
        self.assertEqual(gpuguard.load_checkpoint(self.path), b"old")
        self.assertEqual(self.listing(), ["checkpoint"])

    def test_fsyncs_file_and_directory(self):
        calls = []
        real = os.fsync

        def fsync(fd):
            calls.append(stat.S_ISDIR(os.fstat(fd).st_mode))
            return real(fd)
        with mock.patch.object(ggcheckpoint.os, "fsync", side_effect=fsync):
            gpuguard.save_checkpoint(b"x", self.path)
        self.assertEqual(calls, [False, True])

    def test_keeps_mode(self):
        gpuguard.save_checkpoint(b"old", self.path)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        os.chmod(self.path, 0o640)
        gpuguard.save_checkpoint(b"new", self.path)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o640)

    def test_load_other_errors_raise(self):
        with self.assertRaises(OSError):
            gpuguard.load_checkpoint(self.dir)  # a directory


if __name__ == "__main__":
    unittest.main()


class StaleTempTest(TmpTestCase):
    def test_sweeps_old_temp_files_of_killed_writers(self):
        path = os.path.join(self.dir, "checkpoint")
        old = os.path.join(self.dir, ".checkpoint.abc123.tmp")
        fresh = os.path.join(self.dir, ".checkpoint.def456.tmp")
        other = os.path.join(self.dir, ".other.abc.tmp")
        for p in (old, fresh, other):
            with open(p, "wb") as f:
                f.write(b"partial")
        ancient = time.time() - ggcheckpoint.STALE_TEMP_SECONDS - 60
        os.utime(old, (ancient, ancient))
        os.utime(other, (ancient, ancient))
        gpuguard.save_checkpoint(b"new", path)
        self.assertFalse(os.path.exists(old), "a killed writer's old temp file stays")
        self.assertTrue(os.path.exists(fresh), "a temp file of a write in progress was removed")
        self.assertTrue(os.path.exists(other), "another file's temp file was removed")
