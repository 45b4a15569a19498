import os
import unittest

import gpuguard
from gpuguard import env as ggenv

from .support import TmpTestCase, clean_env, write_state


class ParseStateTest(unittest.TestCase):
    def test_contract_example(self):
        p = ggenv.parse_state('{"seq": 3, "level": 1, "profile": "int8", '
                              '"env": {"DTYPE": "int8", "MAX_BATCH": "16"}, '
                              '"reason": "watermark 0.93 > 0.90"}', levels=3)
        self.assertEqual(p.name, "int8")
        self.assertEqual(p.level, 1)
        self.assertEqual(p.levels, 3)
        self.assertEqual(p.seq, 3)
        self.assertEqual(p.env, {"DTYPE": "int8", "MAX_BATCH": "16"})
        self.assertEqual(p.reason, "watermark 0.93 > 0.90")
        self.assertFalse(p.lowest)

    def test_levels_default_holds_the_level(self):
        p = ggenv.parse_state('{"seq": 1, "level": 2, "profile": "int4", "env": {}}')
        self.assertEqual(p.levels, 3)
        self.assertTrue(p.lowest)
        self.assertEqual(p.reason, "")

    def test_invalid(self):
        for text in ["", "not json", "[]", "{}", '{"profile": ""}',
                     '{"profile": "a", "level": -1}', '{"profile": "a", "level": "1"}',
                     '{"profile": "a", "level": true}', '{"profile": "a", "seq": "3"}',
                     '{"profile": "a", "env": []}', '{"profile": 7}']:
            with self.subTest(text=text):
                self.assertIsNone(ggenv.parse_state(text))

    def test_ignores_unknown_fields(self):
        p = ggenv.parse_state('{"seq": 0, "level": 0, "profile": "fp16", "env": null, "extra": 1}')
        self.assertEqual((p.name, p.env), ("fp16", {}))


class ProfileTest(TmpTestCase):
    def test_from_state_file(self):
        state = os.path.join(self.dir, "state.json")
        write_state(state, 4, 1, "int8", {"MAX_BATCH": "16"}, "manual")
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_STATE=state, GPUGUARD_PROFILE="fp16",
                       GPUGUARD_LEVEL="0", GPUGUARD_LEVELS="3", MAX_BATCH="32"):
            p = gpuguard.profile()
            # The state file wins: it follows live changes, the env does not.
            self.assertEqual((p.name, p.level, p.levels, p.seq), ("int8", 1, 3, 4))
            self.assertEqual(p.get("MAX_BATCH"), "16")
            self.assertEqual(p.get("HOME"), os.environ.get("HOME"))
            self.assertEqual(p.get("NOPE_NOT_SET", "x"), "x")
            self.assertEqual(gpuguard.read_state(), p)

    def test_from_env_when_state_unreadable(self):
        for state in [os.path.join(self.dir, "missing.json"), self.dir]:
            with self.subTest(state=state), clean_env(
                    GPUGUARD_NAME="srv", GPUGUARD_STATE=state, GPUGUARD_PROFILE="int8",
                    GPUGUARD_LEVEL="1", GPUGUARD_LEVELS="3", MAX_BATCH="16"):
                p = gpuguard.profile()
                self.assertEqual((p.name, p.level, p.levels, p.env, p.seq), ("int8", 1, 3, {}, None))
                self.assertEqual(p.get("MAX_BATCH"), "16")

    def test_corrupt_state_falls_back(self):
        state = os.path.join(self.dir, "state.json")
        with open(state, "w") as f:
            f.write("{garbage")
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_STATE=state, GPUGUARD_PROFILE="fp16",
                       GPUGUARD_LEVEL="0", GPUGUARD_LEVELS="2"):
            self.assertEqual(gpuguard.profile().name, "fp16")

    def test_child_variables(self):
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_RESTARTS="2", GPUGUARD_LAST_EXIT="oom",
                       GPUGUARD_CHECKPOINT="/var/lib/gpuguard/srv/checkpoint"):
            self.assertTrue(gpuguard.supervised())
            self.assertEqual(gpuguard.restarts(), 2)
            self.assertEqual(gpuguard.last_exit(), "oom")
            self.assertEqual(gpuguard.checkpoint_path(), "/var/lib/gpuguard/srv/checkpoint")

    def test_bad_numbers(self):
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_RESTARTS="x", GPUGUARD_LEVEL="-3",
                       GPUGUARD_LEVELS="zero"):
            self.assertEqual(gpuguard.restarts(), 0)
            p = gpuguard.profile()
            self.assertEqual((p.level, p.levels), (0, 1))


class UnsupervisedTest(TmpTestCase):
    """Outside gpuguard every call is a harmless default."""

    def test_defaults(self):
        with clean_env():
            self.assertFalse(gpuguard.supervised())
            p = gpuguard.profile()
            self.assertEqual((p.name, p.level, p.levels, p.env, p.seq), ("default", 0, 1, {}, None))
            self.assertEqual(gpuguard.restarts(), 0)
            self.assertEqual(gpuguard.last_exit(), "none")
            self.assertIsNone(gpuguard.checkpoint_path())
            self.assertIsNone(gpuguard.read_state())
            self.assertIsNone(gpuguard.status())
            self.assertIsNone(gpuguard.step("down"))
            self.assertFalse(gpuguard.report_oom("x"))
            self.assertFalse(gpuguard.release("L1"))
            d = gpuguard.reserve(1 << 30, "P0", tool="t")
            self.assertTrue(d.gpu)
            self.assertEqual((d.decision, d.lease, d.reason), ("gpu", "", "not supervised"))
            with gpuguard.reserve("1GiB") as d:
                self.assertTrue(d.gpu)
            self.assertIsNone(gpuguard.save_checkpoint(b"x"))
            self.assertIsNone(gpuguard.load_checkpoint())
            w = gpuguard.on_change(lambda p: None)
            self.assertFalse(w.subscribed)
            self.assertFalse(w.signal_installed)
            w.stop()
            self.assertEqual(os.listdir(self.dir), [])

    def test_arguments_are_still_checked(self):
        with clean_env():
            with self.assertRaises(ValueError):
                gpuguard.reserve(0)
            with self.assertRaises(ValueError):
                gpuguard.reserve(1, priority="P3")
            with self.assertRaises(ValueError):
                gpuguard.step("sideways")
            with self.assertRaises(TypeError):
                gpuguard.on_change(None)


if __name__ == "__main__":
    unittest.main()
