"""gpu_smoke.py's oom, share and order: figures and verdicts out of gpuguard's
journals. testdata/oomladder-events.jsonl, lo-events.jsonl and
hi-events.jsonl are real journals of the binary on the sim backend (an OOM
ladder; two tenants of one GPU, priorities 10 and 90, both of which stepped
down); stamped.err is a real gpuguard stderr stamped as gpu-smoke.sh stamps
it."""
import unittest

from support import E, SmokeCase, child, data, ev


class OomTest(SmokeCase):
    def test_real_journal(self):
        # exit at 02:42:38.072465779, next start at 02:42:38.083930086: 11.46 ms
        out = self.smoke("oom", data("oomladder-events.jsonl"))
        self.assertEqual(out.splitlines(), [
            "  restart reason=oom 6g -> 1g",
            "  exit -> next start (backoff 10ms + waiting for the driver to free the memory): 11 ms",
        ])

    def test_times_trimmed_and_offsets(self):
        for exit_t, start_t, want in [
            ("2026-12-01T02:00:04.5Z", "2026-12-01T02:00:04.75Z", 250),
            ("2026-12-01T02:00:04Z", "2026-12-01T02:00:05.1Z", 1100),
            ("2026-12-01T03:00:04+01:00", "2026-12-01T02:00:04.032Z", 32),
        ]:
            with self.subTest(exit=exit_t, start=start_t):
                j = self.file("j.jsonl", ev("2026-12-01T02:00:00Z", "start", reason="none", pid=5),
                              ev(exit_t, "exit", exit_code=1, status=1),
                              ev(exit_t, "restart", reason="oom", **{"from": "a", "to": "b"}),
                              ev(start_t, "start", profile="b", level=1, reason="oom", pid=6))
                self.assertIn(f"free the memory): {want} ms\n", self.smoke("oom", j))

    def test_missing_journal(self):
        self.assertIn("cannot read", self.smoke("oom", self.missing()))

    def test_no_restart(self):
        # An empty journal, and one whose child exited and never came back.
        for lines in [(), (ev("2026-12-01T02:00:00Z", "start"), ev("2026-12-01T02:00:01Z", "exit", exit_code=1))]:
            with self.subTest(lines=lines):
                out = self.smoke("oom", self.file("j.jsonl", *lines))
                self.assertEqual(out, f"  no restart journaled, no exit -> next start figure ({len(lines) // 2} "
                                      f"exits, {len(lines) // 2} starts)\n")

    def test_bad_time(self):
        j = self.file("j.jsonl", ev("2026-12-01T02:00:00Z", "start"), ev("2026-12-01T02:00:01Z", "exit"),
                      ev("2026-12-01 02:00:02", "start"))
        # A figure that cannot be computed is a verdict in the summary.
        self.assertEqual(self.checks(self.smoke("oom", j, rc=1)), [
            "CHECK FAIL gpu_smoke.py oom: cannot finish (ValueError: not an RFC 3339 time: '2026-12-01 02:00:02')"])


def without(path, *drop):
    """The journal's lines, less those of the events named in drop."""
    with open(path) as f:
        return [line.rstrip("\n") for line in f if not any(f'"event":"{d}"' in line for d in drop)]


class ShareTest(SmokeCase):
    def test_real_journals(self):
        out = self.smoke("share", data("lo-events.jsonl"), data("hi-events.jsonl"))
        lines = out.splitlines()
        self.assertIn("  lo (priority 10): start 1, stepdown 1, yield 1, oom 0, restart 0, critical 0, exit 1", lines)
        self.assertIn("  hi (priority 90): start 1, stepdown 1, yield 1, oom 0, restart 0, critical 1, exit 1", lines)
        self.assertIn("    stepdown big reason=watermark to=small shared GPU GPU-6cf787e2-f3f1-e88a-c2df-1c7b73ef2966: "
                      "step down (seen by lo, watermark 0.98); this instance ranks first", lines)
        self.assertIn("    yield big reason=watermark to=lo GPU-6cf787e2-f3f1-e88a-c2df-1c7b73ef2966: step down by lo, "
                      "which ranks first on the shared GPU", lines)
        self.assertEqual(self.checks(out), [
            "CHECK ok sharing: the priority-10 tenant stepped down (1 times)",
            "CHECK FAIL sharing: the priority-90 tenant never stepped down (1)",
            "CHECK ok sharing: the priority-90 tenant journaled yields to lo (1)",
            "CHECK ok sharing: no OOM and no restart (0 OOMs, 0 restarts)",
        ])

    def test_all_ok(self):
        hi = self.file("hi.jsonl", *without(data("hi-events.jsonl"), "stepdown", "critical"))
        self.assertEqual([c.split()[1] for c in self.checks(self.smoke("share", data("lo-events.jsonl"), hi))],
                         ["ok"] * 4)

    def test_all_fail(self):
        lo = self.file("lo.jsonl", *without(data("lo-events.jsonl"), "stepdown"),
                       ev("2026-12-01T02:43:09Z", "oom", name="lo"),
                       ev("2026-12-01T02:43:09Z", "restart", name="lo", reason="oom"))
        hi = self.file("hi.jsonl", *without(data("hi-events.jsonl"), "yield"))
        self.assertEqual(self.checks(self.smoke("share", lo, hi)), [
            "CHECK FAIL sharing: the priority-10 tenant stepped down (0 times)",
            "CHECK FAIL sharing: the priority-90 tenant never stepped down (1)",
            "CHECK FAIL sharing: the priority-90 tenant journaled yields to lo (0)",
            "CHECK FAIL sharing: no OOM and no restart (1 OOMs, 1 restarts)",
        ])

    def test_missing_and_empty(self):
        out = self.smoke("share", self.missing(), self.file("empty.jsonl"))
        self.assertIn("cannot read", out)
        self.assertEqual([c.split()[1] for c in self.checks(out)], ["FAIL", "ok", "FAIL", "ok"])


class OrderTest(SmokeCase):
    """First tenant starts at E; its CUDA context at E+0.5, memory flat at
    E+0.9, "start complete" stamped at E+3.0; settle 2 s."""

    def run_order(self, second_start, settled=E + 3.0, flat=E + 0.9, swap=False, comma=False):
        ja = self.file("s7a-events.jsonl", ev("2026-12-01T02:00:00Z", "totals", name="s7a", profile=""),
                       ev("2026-12-01T02:00:00Z", "start", name="s7a", profile="only", reason="none", pid=10))
        ea = self.file("s7a.err", f"{E - 0.01:.6f} gpuguard[s7a]: started python3 (pid 10) in profile only (0/1)",
                       f"{settled or E:.6f} gpuguard[s7a]: " +
                       ("start complete: its memory has not grown for 2s" if settled else "child exited"))
        if comma:  # bash's EPOCHREALTIME in a locale with a decimal comma
            with open(ea) as f:
                text = f.read().replace(".", ",", 2)
            with open(ea, "w") as f:
                f.write(text)
        la = self.file("s7a.log", child("cuda", E + 0.5, 7.5, free=10), child("alloc", E + 0.6, 7.6, mib=512),
                       child("flat", flat, 7.9, mib=4096), "not json")
        jb = self.file("s7b-events.jsonl", ev("2026-12-01T02:00:00Z", "totals", name="s7b", profile=""),
                       ev(second_start, "start", name="s7b", profile="only", reason="none", pid=11))
        eb = self.file("s7b.err", f"{E:.6f} gpuguard[s7b]: waiting for s7a to finish starting on GPU GPU-x")
        args = [jb, eb, self.missing(), ja, ea, la] if swap else [ja, ea, la, jb, eb, self.missing()]
        return self.smoke("order", *args, 2)

    def test_ok(self):
        out = self.run_order("2026-12-01T02:00:03.02Z")
        self.assertIn("  s7a started at 2026-12-01T02:00:00+00:00 (+0); its CUDA context +0.500s, its memory flat "
                      "+0.900s, settled (gpuguard: start complete) +3.000s\n  s7b started +3.020s\n", out)
        self.assertEqual(self.checks(out), [
            "CHECK ok start order: s7b started +20 ms after s7a settled",
            "CHECK info start order: s7a settled 2.10s after its memory went flat (settle 2s)",
        ])

    def test_order_from_the_journals_and_offsets(self):
        out = self.run_order("2026-12-01T03:00:03.02+01:00", swap=True, comma=True)
        self.assertIn("CHECK ok start order: s7b started +20 ms after s7a settled", out)

    def test_second_too_early(self):
        out = self.run_order("2026-12-01T02:00:02.5Z")
        self.assertIn("CHECK FAIL start order: s7b started -500 ms after s7a settled", out)

    def test_settled_before_flat(self):
        out = self.run_order("2026-12-01T02:00:01.1Z", settled=E + 1.0, flat=E + 0.2)
        self.assertIn("CHECK info start order: s7a was declared settled 1.20s before its memory had been flat for 2s",
                      out)

    def test_no_start_complete(self):
        out = self.run_order("2026-12-01T02:00:03.02Z", settled=None)
        self.assertEqual(self.checks(out), ["CHECK FAIL start order: no 'start complete' line from s7a"])

    def test_real_stamped_err(self):
        ja = self.file("a.jsonl", ev("2026-12-01T02:42:53.149046051Z", "start", name="lo", profile="big"))
        jb = self.file("b.jsonl", ev("2026-12-01T02:42:53.553275245Z", "start", name="hi", profile="big"))
        out = self.smoke("order", ja, data("stamped.err"), self.missing(), jb, self.missing(), self.missing(), 0.3)
        # settled at 1796092973.514503 (02:42:53.514503): hi 38.772 ms later
        self.assertIn("CHECK ok start order: hi started +39 ms after lo settled", out)

    def test_never_started(self):
        out = self.smoke("order", self.file("a.jsonl"), self.missing(), self.missing(), self.missing(),
                         self.missing(), self.missing(), 2)
        self.assertEqual(self.checks(out), ["CHECK FAIL start order: a tenant never started: ? None, ? None"])


if __name__ == "__main__":
    unittest.main()
