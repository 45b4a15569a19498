"""gpu_smoke.py's time parsing, its usage, and the commands that read
`gpuguard status --json` (gpu0, gpus, scope). The status files in testdata/
come from the real binary on the sim backend (`gpuguard status --json`, with
stderr, as gpu-smoke.sh writes them)."""
import json
import unittest

from support import E, GiB, SmokeCase, data, gpu_smoke


class RFC3339Test(unittest.TestCase):
    def test_table(self):
        for s, want in [
            ("2026-12-01T02:00:00Z", E),
            ("2026-12-01T02:00:00.5Z", E + 0.5),  # Go trims trailing zeros
            ("2026-12-01T02:00:00.000000001Z", E + 1e-9),
            ("2026-12-01T02:00:01.12804385Z", E + 1.12804385),
            ("2026-12-01T03:00:00.25+01:00", E + 0.25),
            ("2026-12-01T00:30:00-01:30", E),
            ("2026-12-01T02:00:00+00:00", E),
        ]:
            with self.subTest(s=s):
                self.assertAlmostEqual(gpu_smoke.rfc3339(s), want, places=6)

    def test_rejects(self):
        for s in ["", "2026-12-01 02:00:00Z", "2026-12-01T02:00:00", "2026-12-01T02:00:00.Z", "yesterday"]:
            with self.subTest(s=s), self.assertRaises(ValueError):
                gpu_smoke.rfc3339(s)


class UsageTest(SmokeCase):
    def test_unknown_command(self):
        self.assertEqual(self.smoke("nope", rc=64), "")

    def test_wrong_argument_count(self):
        self.smoke("oom", rc=64)
        self.smoke("share", data("lo-events.jsonl"), rc=64)


class Gpu0Test(SmokeCase):
    def test_first_gpu(self):
        self.assertEqual(self.smoke("gpu0", data("gpus-status.json")), "1073741824 150323855360\n")

    def test_warning_before_the_json(self):
        # gpu-smoke.sh writes status --json with its stderr (2>&1).
        with open(data("gpus-status.json")) as f:
            text = "gpuguard: warning: listing runtime dir: permission denied\n" + f.read()
        self.assertEqual(self.smoke("gpu0", self.file("s.json", text)), "1073741824 150323855360\n")

    def test_missing_file(self):
        # gpu-smoke.sh reads "USED TOTAL" from the first line: it must not
        # be a positive total.
        out = self.smoke("gpu0", self.missing())
        self.assertIn("cannot read", out)
        self.assertFalse(out.split()[1].isdigit() and int(out.split()[1]) > 0, out)

    def test_no_gpus(self):
        self.assertEqual(self.smoke("gpu0", self.file("s.json", '{"instances": [], "gpus": []}')), "0 0\n")


class GpusTest(SmokeCase):
    def test_each_gpu(self):
        out = self.smoke("gpus", data("gpus-status.json"))
        self.assertEqual(out.splitlines(), [
            "  gpuguard: GPU 0 Simulated GPU GPU-6cf787e2-f3f1-e88a-c2df-1c7b73ef2966 used 1024 MiB of 143360 MiB",
            "  gpuguard: GPU 1 Simulated GPU GPU-83126687-aef8-f4a9-c419-420be2304f58 used 0 MiB of 143360 MiB",
        ])

    def test_missing_file(self):
        self.assertIn("cannot read", self.smoke("gpus", self.missing()))

    def test_no_gpu_with_warning(self):
        # Real: status --json --backend sim with no sim dir, stderr included.
        out = self.smoke("gpus", data("nogpu-status.json"))
        self.assertIn("no GPU list", out)
        self.assertIn("gpuguard: warning: no GPU information: no sim dir", out)

    def test_json_but_no_object(self):
        self.assertIn("no GPU list", self.smoke("gpus", self.file("s.json", "null")))

    def test_not_json(self):
        out = self.smoke("gpus", self.file("s.json", "gpuguard: cannot load libnvidia-ml.so.1"))
        self.assertIn("no GPU list", out)
        self.assertIn("cannot load libnvidia-ml.so.1", out)


class ScopeTest(SmokeCase):
    def status(self, processes, watermark):
        with open(data("scope-status.json")) as f:
            st = json.load(f)
        st["instances"][0]["gpus"][0]["processes"] = processes
        st["instances"][0]["watermark"] = watermark
        return self.file("scope-status.json", json.dumps(st))

    def test_child_listed(self):
        smi = self.file("smi.txt", "10828, python3, 1024 MiB", "")
        out = self.smoke("scope", self.status([{"pid": 10828, "used_bytes": GiB}, {"pid": 7, "used_bytes": 0}], 0.25),
                         "scope", smi)
        self.assertIn("child pid 10828 (NSpid ", out)
        self.assertIn("gpuguard's NVML processes: 10828 (1024 MiB), 7 (0 MiB)", out)
        self.assertIn("  nvidia-smi compute apps: 10828, python3, 1024 MiB\n", out)
        self.assertEqual(self.checks(out), [
            "CHECK info scope=process: the child's pid IS among NVML's processes; watermark 0.250 of the 4 GiB quota "
            "(its own memory was seen)"])

    def test_child_not_listed(self):
        # The real status as it is: no processes, watermark 0.
        out = self.smoke("scope", data("scope-status.json"), "scope", self.missing())
        self.assertIn("gpuguard's NVML processes: none", out)
        self.assertEqual(self.checks(out), [
            "CHECK info scope=process: the child's pid is NOT among NVML's processes; watermark 0.000 of the 4 GiB "
            "quota (none of its memory was seen)"])

    def test_no_such_instance(self):
        out = self.smoke("scope", data("scope-status.json"), "other", self.missing())
        self.assertEqual(self.checks(out), ["CHECK FAIL scope=process: no instance other in status"])

    def test_missing_status(self):
        out = self.smoke("scope", self.missing(), "scope", self.missing())
        self.assertIn("cannot read", out)
        self.assertEqual(self.checks(out), ["CHECK FAIL scope=process: no instance scope in status"])


if __name__ == "__main__":
    unittest.main()
