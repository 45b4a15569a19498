"""Deferred tasks: gpuguard.defer and the task runner against the real
gpuguard binary on the simulated GPU (GPUGUARD_BIN; skipped otherwise),
and their behaviour without gpuguard."""

import json
import os
import shutil
import subprocess
import threading
import unittest

import gpuguard

from .support import clean_env, short_tmpdir, wait_until

BIN = os.environ.get("GPUGUARD_BIN", "")

POLICY = """
name = "pytasks"
command = ["/bin/sh", "-c", "exec sleep 600"]
[watch]
backend = "sim"
interval = "50ms"
[restart]
stop_timeout = "2s"
"""

FULL = str(15 << 30)  # of the sim's 16 GiB: above high


class WithoutGpuguardTest(unittest.TestCase):
    def test_defer_runs_now(self):
        with clean_env():
            d = gpuguard.defer({"x": 1}, "1GiB", tool="t")
        self.assertTrue(d.gpu)
        self.assertFalse(d.queued)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            gpuguard.defer({"x": 1}, 0)
        with self.assertRaises(TypeError):
            gpuguard.defer(object(), "1GiB")

    def test_run_tasks_needs_gpuguard(self):
        with clean_env():
            with self.assertRaises(gpuguard.Unavailable):
                gpuguard.run_tasks(path="")


@unittest.skipUnless(BIN, "set GPUGUARD_BIN to a gpuguard binary (scripts/test.sh builds one)")
class TasksEndToEndTest(unittest.TestCase):
    def setUp(self):
        self.dir = short_tmpdir()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.state = os.path.join(self.dir, "state")
        self.run_dir = os.path.join(self.dir, "run")
        self.sim = os.path.join(self.state, "sim", "0")
        os.makedirs(self.sim)
        os.chmod(self.state, 0o700)
        self.set_used(FULL)
        pol = os.path.join(self.dir, "policy.toml")
        with open(pol, "w") as f:
            f.write(POLICY)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUGUARD_")}
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.addCleanup(self.log.close)
        self.proc = subprocess.Popen([BIN, "run", "--policy", pol, "--state-dir", self.state, "--runtime-dir", self.run_dir],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)
        self.sock = os.path.join(self.run_dir, "pytasks.sock")
        wait_until(lambda: os.path.exists(self.sock), 30, "the socket")
        self.client = gpuguard.Client(self.sock, timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def set_used(self, n):
        tmp = os.path.join(self.sim, ".tmp")
        with open(tmp, "w") as f:
            f.write(n)
        os.rename(tmp, os.path.join(self.sim, "other"))

    def deferral(self, payload):
        box = {}

        def deferred():
            d = gpuguard.defer(payload, "1GiB", tool="embed", client=self.client)
            if d.gpu:
                d.release()  # the first sample had not seen the full GPU yet
                return False
            box["d"] = d
            return True
        wait_until(deferred, 30, "a deferral")
        return box["d"]

    def test_defer_then_handled_when_memory_frees(self):
        d = self.deferral({"doc": 42})
        self.assertTrue(d.queued, d)
        self.assertEqual(d.decision, "defer")
        got = []
        calls = []

        @gpuguard.task("embed")
        def embed(payload):
            calls.append(payload)
            if len(calls) == 1:
                raise RuntimeError("first try fails")
            got.append(payload)

        runner = gpuguard.TaskRunner(path=self.sock)
        t = threading.Thread(target=runner.run, daemon=True)
        t.start()
        self.addCleanup(runner.stop)
        self.set_used("0")
        wait_until(lambda: got, 30, "the task to be handled (after one failure and its backoff)")
        self.assertEqual(got, [{"doc": 42}])

        def listed_done():
            out = subprocess.run([BIN, "tasks", "pytasks", "--json", "--state-dir", self.state],
                                 capture_output=True, check=True).stdout
            tasks = json.loads(out)["tasks"]
            return tasks and tasks[0]["state"] == "done" and tasks[0]["attempts"] == 1 and \
                "first try fails" in tasks[0]["last_error"]
        wait_until(listed_done, 30, "gpuguard tasks to list it done with the failed attempt")


if __name__ == "__main__":
    unittest.main()
