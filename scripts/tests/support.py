"""Helpers for the tests of scripts/gpu_smoke.py: inputs in the shapes the
GPU run produces, and the script run as scripts/gpu-smoke.sh runs it."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from datetime import datetime, timezone

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = os.path.join(SCRIPTS, "gpu_smoke.py")
TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
GiB = 1 << 30
MiB = 1 << 20
# 2026-12-01T02:00:00Z: the reference moment of the synthetic journals and logs.
E = datetime(2026, 12, 1, 2, 0, 0, tzinfo=timezone.utc).timestamp()

sys.path.insert(0, SCRIPTS)
import gpu_smoke  # noqa: E402,F401 (for the tests)


def data(name):
    return os.path.join(TESTDATA, name)


def ev(time, event, name="t", profile="a", level=0, **kw):
    """One journal line as gpuguard writes it (api.Event's field order)."""
    rec = {"time": time, "name": name, "event": event, "profile": profile, "level": level}
    rec.update(kw)
    return json.dumps(rec, separators=(",", ":"))


def child(ev_, t, m, **kw):
    """One line of examples/gpu/ramp.py's stdout (its emit())."""
    rec = {"ev": ev_, "t": t, "m": m}
    rec.update(kw)
    return json.dumps(rec)


class SmokeCase(unittest.TestCase):
    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.dir = d.name

    def file(self, name, *lines):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return p

    def missing(self, name="missing"):
        return os.path.join(self.dir, name)

    def smoke(self, *args, rc=0):
        """stdout of `python3 scripts/gpu_smoke.py ARGS`; a traceback fails."""
        p = subprocess.run([sys.executable, SMOKE] + [str(a) for a in args], capture_output=True, text=True,
                           timeout=60)
        self.assertNotIn("Traceback", p.stderr + p.stdout, p.stderr)
        self.assertEqual(p.returncode, rc, p.stdout + p.stderr)
        return p.stdout

    def checks(self, out):
        return [line for line in out.splitlines() if line.startswith("CHECK ")]
