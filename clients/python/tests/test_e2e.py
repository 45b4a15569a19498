"""End-to-end: the client against the real gpuguard binary on the simulated
GPU. Set GPUGUARD_BIN to the binary (scripts/test.sh does); skipped
otherwise."""

import json
import os
import shutil
import subprocess
import sys
import unittest

from .support import short_tmpdir, wait_until

BIN = os.environ.get("GPUGUARD_BIN", "")
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_ROOT = os.path.dirname(HERE)
CHILD = os.path.join(HERE, "e2e_child.py")

POLICY = """
[watch]
backend = "sim"
interval = "50ms"
[watermark]
high = 0.90
critical = 0.97
low = 0.70
sustain = "1s"
grace = "10s"
recover_after = "0s"
[restart]
backoff = "50ms"
backoff_max = "1s"
release_timeout = "2s"
stop_timeout = "5s"
[[profile]]
name = "fp16"
live = true
env = { MAX_BATCH = "32" }
[[profile]]
name = "int8"
live = true
env = { MAX_BATCH = "16" }
[[profile]]
name = "int4"
live = true
env = { MAX_BATCH = "8" }
"""


@unittest.skipUnless(BIN, "set GPUGUARD_BIN to a gpuguard binary to run the end-to-end tests "
                          "(scripts/test.sh builds one)")
class EndToEndTest(unittest.TestCase):
    NAME = "pyclient"

    def setUp(self):
        if not os.access(BIN, os.X_OK):
            self.fail("GPUGUARD_BIN=%s is not an executable" % BIN)
        self.dir = short_tmpdir()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.out = os.path.join(self.dir, "out")
        self.run_dir = os.path.join(self.dir, "run")
        self.state_dir = os.path.join(self.dir, "state")
        os.mkdir(self.out)
        self.policy = os.path.join(self.dir, "policy.toml")
        with open(self.policy, "w") as f:
            f.write(POLICY)

    def start(self, mode):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUGUARD_")}
        env.pop("NOTIFY_SOCKET", None)
        env["PYTHONPATH"] = CLIENT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env["E2E_OUT"] = self.out
        env["E2E_MODE"] = mode
        self.log = open(os.path.join(self.dir, "gpuguard.log"), "w+")
        self.addCleanup(self.log.close)
        proc = subprocess.Popen(
            [BIN, "run", "--backend", "sim", "--policy", self.policy, "--state-dir", self.state_dir,
             "--runtime-dir", self.run_dir, "--name", self.NAME, "--", sys.executable, CHILD],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def stop():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.addCleanup(stop)
        self.proc = proc
        return proc

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def result(self, name, timeout=15):
        path = os.path.join(self.out, name + ".json")

        def ready():
            if os.path.exists(path):
                return True
            if self.proc.poll() is not None and not os.path.exists(path):
                self.fail("gpuguard exited %s before %s.json:\n%s" % (self.proc.returncode, name, self.output()))
            return False
        try:
            wait_until(ready, timeout, what="%s.json from the child" % name)
        except AssertionError:
            self.fail("no %s.json within %ss; gpuguard said:\n%s" % (name, timeout, self.output()))
        with open(path) as f:
            return json.load(f)

    def gpuguard(self, *args):
        return subprocess.run([BIN] + list(args) + ["--runtime-dir", self.run_dir],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=15,
                              universal_newlines=True)

    def wait_exit(self, timeout=20):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.fail("gpuguard still running after %ss:\n%s" % (timeout, self.output()))

    def test_client_under_gpuguard(self):
        self.start("socket")
        ready = self.result("ready")
        msg = self.output
        self.assertTrue(ready["supervised"])
        self.assertEqual(ready["restarts"], 0)
        self.assertEqual(ready["last_exit"], "none")
        self.assertTrue(os.path.isabs(ready["checkpoint_path"]))
        self.assertEqual(os.path.realpath(ready["checkpoint_path"]),
                         os.path.realpath(os.path.join(self.state_dir, "checkpoint")))
        p = ready["profile"]
        self.assertEqual((p["name"], p["level"], p["levels"], p["env"]), ("fp16", 0, 3, {"MAX_BATCH": "32"}))
        self.assertEqual(ready["max_batch"], "32")

        st = ready["status"]
        self.assertEqual((st["name"], st["child_pid"], st["profile"], st["level"], st["levels"]),
                         (self.NAME, ready["pid"], "fp16", 0, 3), msg())
        self.assertEqual(st["state"], "running")

        self.assertEqual(ready["fits"], ["gpu", True])
        self.assertEqual(ready["leases_held"], 1)
        self.assertEqual(ready["over"], {"P0": ["deny", ""], "P1": ["cpu", ""], "P2": ["defer", ""]})
        self.assertTrue(ready["released"])
        self.assertEqual(ready["leases_after"], 0)
        self.assertTrue(ready["with_gpu"])
        self.assertEqual(ready["leases_after_with"], 0)
        self.assertTrue(ready["signal_installed"])
        self.assertTrue(ready["subscribed"])

        step = self.gpuguard("step", self.NAME, "down")
        self.assertEqual(step.returncode, 0, step.stdout)

        first = self.result("first")
        self.assertTrue(first["changed"], msg())
        self.assertEqual(len(first["changes"]), 1, first["changes"])
        ch = first["changes"][0]
        self.assertEqual((ch["name"], ch["level"], ch["levels"], ch["env"]), ("int8", 1, 3, {"MAX_BATCH": "16"}))
        self.assertIsInstance(ch["seq"], int)
        self.assertEqual(first["profile_after"]["name"], "int8")
        self.assertTrue(first["oom_acked"])

        # The OOM restarts the server one profile lower, with the checkpoint.
        second = self.result("second")
        self.assertEqual(second["last_exit"], "oom", msg())
        self.assertEqual(second["restarts"], 1)
        self.assertEqual(second["profile"]["name"], "int4")
        self.assertEqual(second["profile"]["level"], 2)
        self.assertEqual(second["env_profile"], "int4")
        self.assertEqual(second["max_batch"], "8")
        self.assertEqual(second["checkpoint"], "phase one")
        self.assertEqual(self.wait_exit(), 0, msg())

    def test_signal_fallback(self):
        # No socket for the client: the change arrives through SIGUSR1 and
        # the state file, on the main thread.
        self.start("signal")
        ready = self.result("ready")
        self.assertTrue(ready["signal_installed"])
        step = self.gpuguard("step", self.NAME, "down")
        self.assertEqual(step.returncode, 0, step.stdout)
        first = self.result("first")
        self.assertTrue(first["changed"], self.output())
        self.assertEqual([(c["name"], c["main_thread"]) for c in first["changes"]], [("int8", True)])
        self.assertEqual(self.wait_exit(), 0, self.output())

    def test_change_before_on_change(self):
        # The server has no handler yet when the step comes: gpuguard
        # does not signal it (which would kill it), and on_change delivers
        # the missed change once, then the next one once.
        self.start("late")
        waiting = self.result("waiting")
        step = self.gpuguard("step", self.NAME, "down")
        self.assertEqual(step.returncode, 0, step.stdout)
        with open(os.path.join(self.out, "go"), "w"):
            pass
        ready = self.result("ready")
        self.assertTrue(ready["signal_installed"])
        self.assertTrue(ready["subscribed"], self.output())
        self.assertEqual([(c["name"], c["level"], c["seq"]) for c in ready["at_call"]], [("int8", 1, 2)], self.output())
        step = self.gpuguard("step", self.NAME, "down")
        self.assertEqual(step.returncode, 0, step.stdout)
        first = self.result("first")
        self.assertTrue(first["changed"], self.output())
        self.assertEqual([(c["name"], c["seq"]) for c in first["changes"]], [("int8", 2), ("int4", 3)], self.output())
        self.assertEqual(first["restarts"], 0)
        self.assertEqual(self.wait_exit(), 0, self.output())
        with open(os.path.join(self.state_dir, "events.jsonl")) as f:
            events = [json.loads(line)["event"] for line in f]
        self.assertEqual(events.count("start"), 1, events)
        self.assertEqual(events.count("notify_skipped"), 1, events)
        self.assertIn("SIGUSR1 not sent", self.output())
        self.assertEqual(waiting["restarts"], 0)


if __name__ == "__main__":
    unittest.main()
