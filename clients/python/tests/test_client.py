import json
import os
import socket
import threading
import time
import unittest
from unittest import mock

import gpuguard
from gpuguard import client as ggclient

from .support import TmpTestCase, clean_env, wait_until

GiB = 1 << 30


class ParseTest(unittest.TestCase):
    def test_parse_size(self):
        cases = {
            4096: 4096, "4096": 4096, "16GiB": 16 * GiB, "1.5GB": 1500000000, "2MiB": 2 << 20,
            "1KB": 1000, "1TiB": 1 << 40, "10B": 10, ".5KiB": 512, " 3 MB ": 3000000, 2.2: 3,
        }
        for given, want in cases.items():
            with self.subTest(given=given):
                self.assertEqual(gpuguard.parse_size(given), want)
        for bad in ["", "GiB", "1 gib", "1XB", "-1", "1e9", True, None, float("inf")]:
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                gpuguard.parse_size(bad)

    def test_ttl(self):
        self.assertEqual(ggclient._ttl("60s"), "60s")
        self.assertEqual(ggclient._ttl("1m30s"), "1m30s")
        self.assertEqual(ggclient._ttl("250ms"), "250ms")
        self.assertEqual(ggclient._ttl(90), "90000ms")
        self.assertEqual(ggclient._ttl(1.5), "1500ms")
        self.assertEqual(ggclient._ttl(1e-9), "1ms")
        for bad in ["", "60", "s", "1x", "-1s", 0, -1, True, None]:
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                ggclient._ttl(bad)


class ClientTest(TmpTestCase):
    def setUp(self):
        super().setUp()
        self.srv = self.fake_server()
        env = clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=self.srv.path)
        env.start()
        self.addCleanup(env.stop)

    def test_status(self):
        st = gpuguard.status()
        self.assertEqual(st["name"], "fake")
        self.assertEqual(st["profile"], "fp16")
        self.assertNotIn("ok", st)
        self.assertNotIn("id", st)
        self.assertEqual(self.srv.requests[-1]["type"], "status")

    def test_ids_are_sent_and_matched(self):
        # A reply to another id and an event come first: both are skipped.
        def status(req):
            conn = self.srv.conns[-1]
            self.srv._send(conn, {"ok": True, "id": "someone-else", "name": "wrong"})
            self.srv._send(conn, {"type": "profile", "seq": 9, "level": 1, "profile": "int8", "env": {}})
            return {"ok": True, "name": "right"}
        self.srv.handlers["status"] = status
        self.assertEqual(gpuguard.status()["name"], "right")
        self.srv.handlers["status"] = lambda req: {"ok": True}
        gpuguard.status()
        ids = [r["id"] for r in self.srv.requests]
        self.assertTrue(all(isinstance(i, int) for i in ids))
        self.assertEqual(len(set(ids)), len(ids))

    def test_step(self):
        self.assertEqual(gpuguard.step("down"), "int8")
        self.assertEqual(gpuguard.step("down"), "int4")
        with self.assertRaises(gpuguard.Error) as cm:
            gpuguard.step("down")
        self.assertIn("no profile down", str(cm.exception))
        self.assertFalse(cm.exception.reply["ok"])
        self.assertEqual(gpuguard.step("up"), "int8")
        self.assertEqual([r["direction"] for r in self.srv.of_type("step")], ["down", "down", "down", "up"])

    def test_status_error_raises(self):
        self.srv.handlers["status"] = lambda req: {"ok": False, "error": "boom"}
        with self.assertRaisesRegex(gpuguard.Error, "boom"):
            gpuguard.status()

    def test_refusal_without_id(self):
        # gpuguard refuses a peer of another uid with an id-less error line.
        self.srv.handlers["status"] = lambda req: {"ok": False, "error": "permission denied"}
        orig = self.srv._handle

        def handle(conn, line):
            req = json.loads(line)
            req.pop("id", None)
            orig(conn, json.dumps(req).encode())
        self.srv._handle = handle
        with self.assertRaisesRegex(gpuguard.Error, "permission denied"):
            gpuguard.status()

    def test_reserve_decisions_and_release(self):
        d = gpuguard.reserve(8 * GiB, "P1", tool="embed", ttl="30s")
        self.assertEqual(d.decision, "gpu")
        self.assertTrue(d.gpu)
        self.assertTrue(d.lease)
        req = self.srv.of_type("reserve")[-1]
        self.assertEqual((req["bytes"], req["priority"], req["tool"], req["ttl"]), (8 * GiB, "P1", "embed", "30s"))
        for prio, want in [("P0", "deny"), ("P1", "cpu"), ("P2", "defer")]:
            with self.subTest(prio=prio):
                over = gpuguard.reserve("8GiB", prio)
                self.assertEqual((over.decision, over.lease, over.gpu), (want, "", False))
                self.assertEqual(over.reason, "over the high watermark")
                self.assertFalse(over.release())  # nothing to release
        self.assertTrue(d.release())
        self.assertFalse(d.release())  # once
        self.assertEqual([r["lease"] for r in self.srv.of_type("release")], [d.lease])
        gpuguard.reserve(1).release()
        self.assertNotIn("tool", self.srv.of_type("reserve")[-1])

    def test_reserve_context_manager(self):
        with gpuguard.reserve(4 * GiB) as d:
            self.assertTrue(d.gpu)
            self.assertEqual(len(self.srv.leases), 1)
        self.assertEqual(self.srv.leases, {})
        with gpuguard.reserve(20 * GiB, "P2") as d:
            self.assertTrue(d.deferred)
        self.assertEqual(len(self.srv.of_type("release")), 1)  # only the gpu lease
        # Released even when the work raises.
        with self.assertRaises(KeyError):
            with gpuguard.reserve(GiB):
                raise KeyError("x")
        self.assertEqual(self.srv.leases, {})

    def test_release_unknown_lease_is_quiet(self):
        self.assertFalse(gpuguard.release("expired"))
        with self.assertRaisesRegex(gpuguard.Error, "unknown lease"):
            gpuguard.Client().release("expired")

    def test_reserve_refused_fails_open(self):
        self.srv.handlers["reserve"] = lambda req: {"ok": False, "error": "shutting down"}
        with self.assertLogs("gpuguard", "WARNING"):
            d = gpuguard.reserve(GiB)
        self.assertTrue(d.gpu)
        self.assertIn("shutting down", d.reason)

    def test_reserve_bad_decision_fails_open(self):
        self.srv.handlers["reserve"] = lambda req: {"ok": True, "decision": "maybe"}
        with self.assertLogs("gpuguard", "WARNING"):
            self.assertTrue(gpuguard.reserve(GiB).gpu)

    def test_report_oom(self):
        self.assertTrue(gpuguard.report_oom("CUDA out of memory. Tried to allocate 2 GiB"))
        self.assertEqual(self.srv.oom, ["CUDA out of memory. Tried to allocate 2 GiB"])
        self.assertTrue(gpuguard.report_oom("x" * (100 << 10)))
        self.assertLess(len(self.srv.oom[-1]), 64 << 10)

    def test_ready(self):
        self.assertTrue(gpuguard.ready())
        gpuguard.Client().ready()
        self.assertEqual(self.srv.readies, 2)
        self.assertEqual([r["type"] for r in self.srv.requests[-2:]], ["ready", "ready"])
        self.srv.handlers["ready"] = lambda req: {"ok": False, "error": "ready: not supported by this instance"}
        self.assertFalse(gpuguard.ready())
        with self.assertRaisesRegex(gpuguard.Error, "not supported"):
            gpuguard.Client().ready()

    def test_line_limit(self):
        with self.assertRaises(ValueError):
            gpuguard.Client().request({"type": "status", "pad": "x" * (64 << 10)})


class UnavailableTest(TmpTestCase):
    def test_socket_gone(self):
        path = os.path.join(self.dir, "gone.sock")
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=path):
            self.assertIsNone(gpuguard.status())
            self.assertIsNone(gpuguard.step("down"))
            self.assertFalse(gpuguard.report_oom())
            self.assertFalse(gpuguard.ready())
            self.assertFalse(gpuguard.release("L1"))
            d = gpuguard.reserve(GiB, "P0")
            self.assertTrue(d.gpu)
            self.assertIn("unavailable", d.reason)
            with self.assertRaises(gpuguard.Unavailable):
                gpuguard.Client().status()
            with self.assertRaises(gpuguard.Error):  # Unavailable is an Error
                gpuguard.Client().status()
        with clean_env():
            with self.assertRaisesRegex(gpuguard.Unavailable, "GPUGUARD_SOCKET"):
                gpuguard.Client().status()

    def test_stale_socket_file(self):
        # A socket file nobody listens on (gpuguard was SIGKILLed).
        path = os.path.join(self.dir, "stale.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=path):
            self.assertIsNone(gpuguard.status())
            self.assertTrue(gpuguard.reserve(1).gpu)

    def test_no_reply_times_out(self):
        srv = self.fake_server()
        srv.handlers["status"] = lambda req: None
        srv.handlers["reserve"] = lambda req: None
        srv.handlers["oom"] = lambda req: None
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=srv.path), \
                mock.patch.object(ggclient, "DEFAULT_TIMEOUT", 0.2):
            t0 = time.monotonic()
            self.assertIsNone(gpuguard.status())
            self.assertTrue(gpuguard.reserve(1, "P2").gpu)
            self.assertFalse(gpuguard.report_oom())
            self.assertLess(time.monotonic() - t0, 3)
            with self.assertRaisesRegex(gpuguard.Unavailable, "in time"):
                gpuguard.Client(timeout=0.1).status()

    def test_closed_without_reply(self):
        srv = self.fake_server()

        def hang_up(req):
            srv.conns[-1].shutdown(socket.SHUT_RDWR)
            return None
        srv.handlers["status"] = hang_up
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=srv.path):
            with self.assertRaisesRegex(gpuguard.Unavailable, "closed"):
                gpuguard.Client().status()

    def test_garbage_reply(self):
        path = os.path.join(self.dir, "junk.sock")
        ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ln.bind(path)
        ln.listen(1)
        self.addCleanup(ln.close)

        def serve():
            c, _ = ln.accept()
            c.recv(1024)
            c.sendall(b"this is not json\n")
            c.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        with clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=path):
            self.assertIsNone(gpuguard.status())
        t.join(2)


if __name__ == "__main__":
    unittest.main()
