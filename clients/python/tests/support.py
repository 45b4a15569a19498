"""Test helpers: a fake gpuguard control socket, environment isolation and
polling with a deadline (the tests never sleep to synchronise)."""

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest
from unittest import mock


def wait_until(pred, timeout=5.0, what="condition"):
    """Poll pred until it is true; fail the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what() if callable(what) else what))
        time.sleep(0.005)  # polling interval, not synchronisation


def short_tmpdir():
    """A temp dir whose socket paths fit AF_UNIX's 108 bytes."""
    base = tempfile.gettempdir()
    if len(base) > 60:
        base = "/tmp"
    return tempfile.mkdtemp(prefix="ggpy", dir=base)


def clean_env(**values):
    """mock.patch.dict of os.environ without any GPUGUARD_* variable, plus
    values (None removes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUGUARD_")}
    for k, v in values.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return mock.patch.dict(os.environ, env, clear=True)


def write_state(path, seq, level, profile, env=None, reason=""):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"seq": seq, "level": level, "profile": profile, "env": env or {}, "reason": reason}, f)
    os.replace(tmp, path)


class FakeServer(object):
    """A gpuguard control socket speaking the contract's protocol.

    requests records every decoded request. handlers maps a request type to
    a function(request) -> reply dict (the id is added), or None for no
    reply. The defaults model a 16 GiB GPU with a 0.9 high watermark and a
    three-profile ladder.
    """

    LADDER = ["fp16", "int8", "int4"]

    def __init__(self, path):
        self.path = path
        self.requests = []
        self.subscribers = []
        self.conns = []
        self.lock = threading.Lock()
        self.level = 0
        self.capacity = int(16 * (1 << 30) * 0.9)
        self.leases = {}
        self.next_lease = 1
        self.oom = []
        self.readies = 0
        self.handlers = {
            "ready": self._ready,
            "status": self._status,
            "reserve": self._reserve,
            "release": self._release,
            "oom": self._oom,
            "step": self._step,
        }
        self.ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ln.bind(path)
        self.ln.listen(16)
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    # Default behaviour.

    def _status(self, req):
        return {"ok": True, "name": "fake", "pid": 1, "child_pid": os.getpid(), "state": "running",
                "profile": self.LADDER[self.level], "level": self.level, "levels": len(self.LADDER),
                "watermark": 0.1, "restarts": 0, "uptime_seconds": 1.0, "observe": False,
                "gpus": [], "leases": len(self.leases), "tasks": 0, "last_event": None}

    def _reserve(self, req):
        n = req["bytes"]
        used = sum(self.leases.values())
        if used + n <= self.capacity:
            lease = "L%d" % self.next_lease
            self.next_lease += 1
            self.leases[lease] = n
            return {"ok": True, "decision": "gpu", "lease": lease, "reason": "fits"}
        d = {"P0": "deny", "P1": "cpu", "P2": "defer"}[req.get("priority", "P1")]
        return {"ok": True, "decision": d, "lease": "", "reason": "over the high watermark"}

    def _release(self, req):
        if self.leases.pop(req.get("lease"), None) is None:
            return {"ok": False, "error": "unknown lease %r" % req.get("lease")}
        return {"ok": True}

    def _oom(self, req):
        self.oom.append(req.get("detail", ""))
        return {"ok": True}

    def _ready(self, req):
        self.readies += 1
        return {"ok": True}

    def _step(self, req):
        nxt = self.level + (1 if req["direction"] == "down" else -1)
        if not 0 <= nxt < len(self.LADDER):
            return {"ok": False, "error": "no profile %s %s" % (req["direction"], self.LADDER[self.level])}
        self.level = nxt
        return {"ok": True, "profile": self.LADDER[nxt]}

    # Plumbing.

    def _accept(self):
        while True:
            try:
                conn, _ = self.ln.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self._handle(conn, line)
        except OSError:
            return

    def _handle(self, conn, line):
        try:
            req = json.loads(line)
        except ValueError:
            self._send(conn, {"ok": False, "error": "malformed request"})
            return
        with self.lock:
            self.requests.append(req)
        typ = req.get("type")
        if typ == "subscribe":
            with self.lock:
                self.subscribers.append(conn)
            reply = {"ok": True}
        else:
            h = self.handlers.get(typ)
            reply = h(req) if h else {"ok": False, "error": "unknown request type %r" % typ}
        if reply is None:
            return
        reply = dict(reply)
        if "id" in req:
            reply["id"] = req["id"]
        self._send(conn, reply)

    def _send(self, conn, obj):
        try:
            conn.sendall(json.dumps(obj).encode() + b"\n")
        except OSError:
            pass

    def of_type(self, typ):
        with self.lock:
            return [r for r in self.requests if r.get("type") == typ]

    def publish(self, seq, level, profile, env=None, reason="manual"):
        ev = {"type": "profile", "seq": seq, "level": level, "profile": profile,
              "env": env or {}, "reason": reason}
        with self.lock:
            subs = list(self.subscribers)
        for c in subs:
            self._send(c, ev)

    def drop_subscribers(self, error=None):
        """End every subscription, optionally with an error line first (as
        gpuguard does for a subscriber that fell behind)."""
        with self.lock:
            subs, self.subscribers = self.subscribers, []
        for c in subs:
            if error:
                self._send(c, {"ok": False, "error": error})
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        """Stop serving and remove the socket: gpuguard is gone."""
        try:
            self.ln.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.ln.close()
        self.accepting.join(2)
        with self.lock:
            conns, self.conns, self.subscribers = self.conns, [], []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


class TmpTestCase(unittest.TestCase):
    """A test case with a fresh short temp dir in self.dir."""

    def setUp(self):
        super().setUp()
        self.dir = short_tmpdir()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def fake_server(self, name="gg.sock"):
        srv = FakeServer(os.path.join(self.dir, name))
        self.addCleanup(srv.close)
        return srv
