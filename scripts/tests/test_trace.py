"""gpu_smoke.py's trace against a fake instance: a Unix socket that answers
status requests as gpuguard's control socket does (one JSON line a request,
the reply carrying its id and "ok": true)."""
import json
import os
import socketserver
import tempfile
import threading
import unittest

from support import SmokeCase

STATUS = {"name": "ramp", "pid": 1, "child_pid": 2, "state": "running", "profile": "a", "level": 0, "levels": 2,
          "priority": 0, "watermark": 0.42, "interval_seconds": 0.25, "eta_seconds": 3.5, "restarts": 0}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            req = json.loads(line)
            self.server.requests.append(req)
            reply = dict(STATUS, ok=True, id=req["id"]) if req.get("type") == "status" else {"ok": False}
            self.wfile.write(json.dumps(reply).encode() + b"\n")


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TraceTest(SmokeCase):
    def setUp(self):
        super().setUp()
        # A short path: sun_path holds 108 bytes.
        d = tempfile.TemporaryDirectory(prefix="ggt", dir="/tmp")
        self.addCleanup(d.cleanup)
        self.sock = os.path.join(d.name, "s.sock")

    def test_polls_status(self):
        srv = Server(self.sock, Handler)
        srv.requests = []
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
        t.start()
        try:
            out = os.path.join(self.dir, "trace.jsonl")
            self.assertEqual(self.smoke("trace", self.sock, out, 0.3), "")
        finally:
            srv.shutdown()
            t.join()
            srv.server_close()
        with open(out) as f:
            rows = [json.loads(line) for line in f]
        self.assertGreaterEqual(len(rows), 1)
        self.assertEqual(len(rows), len(srv.requests))
        self.assertTrue(all(r["type"] == "status" for r in srv.requests))
        for r in rows:
            self.assertEqual(set(r), {"t", "watermark", "interval_seconds", "eta_seconds", "profile", "state"})
            self.assertEqual((r["watermark"], r["interval_seconds"], r["eta_seconds"], r["profile"], r["state"]),
                             (0.42, 0.25, 3.5, "a", "running"))
        self.assertEqual([r["t"] for r in rows], sorted(r["t"] for r in rows))

    def test_no_socket(self):
        out = os.path.join(self.dir, "trace.jsonl")
        self.assertEqual(self.smoke("trace", self.sock, out, 0.2), "")
        with open(out) as f:
            self.assertEqual(f.read(), "")


if __name__ == "__main__":
    unittest.main()
