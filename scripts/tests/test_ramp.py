"""gpu_smoke.py's ramp: the adaptive period on a ramp (gpu-smoke.sh section 8).

The GPU has 140 GiB; the quota is 10 GiB (2 GiB used before + 8 GiB), so
high (0.9) is 9 GiB used. The child (examples/gpu/ramp.py's lines) reaches 3,
6 and 9 GiB used; the third block began at m 100.9 and was done at m 101.0
(wall clock E+1.0)."""
import json
import unittest

from support import E, GiB, SmokeCase, child, ev

TOTAL = 140 * GiB
QUOTA = 10 * GiB


def alloc(mib, used_gib, m0, m):
    return child("alloc", E + (m - 100.0), m, mib=mib, free=TOTAL - used_gib * GiB, m0=m0)


class RampTest(SmokeCase):
    def ramp(self, sig_m=101.15, allocs=None, trace=None, calm=None, rc=0):
        if allocs is None:
            allocs = [alloc(1024, 3, 100.0, 100.1), alloc(4096, 6, 100.4, 100.5), alloc(7168, 9, 100.9, 101.0)]
        sigs = [] if sig_m is None else [child("signal", E + sig_m - 100.0, sig_m)]
        log = self.file("ramp.log", child("cuda", E - 1, 99.0, free=TOTAL - 2 * GiB), *allocs, *sigs,
                        child("flat", E + 1.2, 101.2, mib=1024), "a line that is not JSON", child("done", E + 10, 110.0))
        j = self.file("ramp-events.jsonl", ev("2026-12-01T02:00:00Z", "totals", name="ramp", profile=""),
                      ev("2026-12-01T02:00:01.2Z", "stepdown", name="ramp", reason="watermark", watermark=0.91,
                         **{"from": "a", "to": "b"}))
        if trace is None:
            trace = [(0.5, 0.5, 0.5), (0.8, 0.8, 0.2), (0.95, 0.85, 0.1), (1.1, 0.92, 0.05)]
        tr = self.file("ramp-trace.jsonl", *(json.dumps({"t": E + t, "watermark": w, "interval_seconds": iv,
                                                         "eta_seconds": None, "profile": "a", "state": "running"})
                                             for t, w, iv in trace))
        if calm is None:
            calm = {"instances": [{"name": "ramp", "interval_seconds": 1.0, "watermark": 0.1}], "gpus": []}
        c = self.file("ramp-calm.json", json.dumps(calm)) if calm != "missing" else self.missing()
        return self.smoke("ramp", log, j, TOTAL, QUOTA, 0.9, tr, c, rc=rc)

    def test_figures(self):
        out = self.ramp()
        # 6144 MiB in 0.9 s: 6.67 GiB/s, 0.667 of the 10 GiB quota a second
        self.assertIn("  ramp: 6144 MiB in 0.90s: 6.67 GiB/s, 0.667 of the quota a second\n", out)
        # signal at m 101.15: 250 ms after the block began, 150 ms after it was done
        self.assertIn("  crossed high (9.00 GiB used, by cudaMemGetInfo) at block 7168 MiB; SIGUSR1 250 ms after "
                      "that block's allocation began, 150 ms after it was done\n", out)
        self.assertIn("  stepdown journaled 200 ms after the crossing (reason watermark)\n", out)
        self.assertIn("  gpuguard's status first showed the watermark at or above high 100 ms after the crossing "
                      "(0.920)\n", out)
        self.assertIn("  period (status trace) just before the crossing: 500 ms at 0.500, 200 ms at 0.800, "
                      "100 ms at 0.850\n  shortest period during the ramp: 100 ms\n", out)
        self.assertEqual(self.checks(out), [
            "CHECK ok ramp: crossing high -> SIGUSR1 250 ms (sustain 0s, adaptive defaults)",
            "CHECK ok ramp: period at calm 1s (watermark 0.100; max_interval 1s expected)",
        ])

    def test_late_and_early_signal(self):
        for sig_m, want in [(102.5, "1600 ms"), (100.8, "-100 ms")]:
            with self.subTest(sig_m=sig_m):
                self.assertIn(f"CHECK FAIL ramp: crossing high -> SIGUSR1 {want} ", self.ramp(sig_m=sig_m))

    def test_calm_period_not_max(self):
        out = self.ramp(calm={"instances": [{"name": "ramp", "interval_seconds": 0.5, "watermark": 0.1}]})
        self.assertIn("CHECK FAIL ramp: period at calm 0.5s (watermark 0.100;", out)

    def test_calm_stale_instance_first(self):
        # status --json lists instances by name; a stale socket of an earlier
        # section's instance ("lo" < "ramp") answers as unreachable.
        stale = {"name": "lo", "pid": 9, "child_pid": 0, "state": "unreachable", "watermark": 0,
                 "interval_seconds": 0, "gpus": [], "error": "not running (stale socket: connection refused)"}
        out = self.ramp(calm={"instances": [stale, {"name": "ramp", "interval_seconds": 1.0, "watermark": 0.1}]})
        self.assertIn("CHECK ok ramp: period at calm 1s (watermark 0.100;", out)

    def test_calm_missing(self):
        out = self.ramp(calm="missing")
        self.assertIn("cannot read", out)
        self.assertIn("CHECK FAIL ramp: no status at calm", out)

    def test_no_signal(self):
        self.assertEqual(self.checks(self.ramp(sig_m=None)), ["CHECK FAIL ramp: no SIGUSR1 arrived"])

    def test_never_crossed(self):
        out = self.ramp(allocs=[alloc(1024, 3, 100.0, 100.1), alloc(4096, 6, 100.4, 100.5)])
        self.assertEqual(self.checks(out), [
            "CHECK FAIL ramp: the child's memory never crossed high (9.00 GiB used of 140.0)"])

    def test_too_few_blocks(self):
        out = self.ramp(allocs=[alloc(1024, 3, 100.0, 100.1)])
        self.assertEqual(self.checks(out), ["CHECK FAIL ramp: the child allocated 1 blocks"])

    def test_empty_trace(self):
        out = self.ramp(trace=[])
        self.assertNotIn("period (status trace)", out)
        self.assertEqual([c.split()[1] for c in self.checks(out)], ["ok", "ok"])

    def test_not_a_number(self):
        log = self.file("ramp.log", alloc(1024, 3, 100.0, 100.1))
        out = self.smoke("ramp", log, self.missing(), "", QUOTA, 0.9, self.missing(), self.missing(), rc=1)
        self.assertEqual(self.checks(out), [
            "CHECK FAIL gpu_smoke.py ramp: cannot finish (ValueError: invalid literal for int() with base 10: '')"])

    def test_internal_type_error_is_no_usage_error(self):
        # A trace row without a watermark fails inside the command: that is
        # a verdict (exit 1), not a usage error (exit 64, stderr only).
        out = self.ramp(trace=[(0.5, None, 0.5)], rc=1)
        self.assertIn("CHECK FAIL gpu_smoke.py ramp: cannot finish (TypeError: ", out)

    def test_missing_log(self):
        out = self.smoke("ramp", self.missing(), self.missing(), TOTAL, QUOTA, 0.9, self.missing(), self.missing())
        self.assertIn("cannot read", out)
        self.assertEqual(self.checks(out), ["CHECK FAIL ramp: the child allocated 0 blocks"])


if __name__ == "__main__":
    unittest.main()
