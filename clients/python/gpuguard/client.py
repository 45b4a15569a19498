"""Requests on gpuguard's control socket.

The protocol is newline-delimited JSON over an AF_UNIX stream socket, one
object a line. Every request here carries an "id" and waits, with a
deadline, for the reply that echoes it; "profile" events on the same
connection are skipped.

Client is strict: it raises Unavailable when there is no socket or it does
not answer, and Error when gpuguard refuses. The module-level functions
(reserve, release, report_oom, ready, status, step) are safe to call from a server
that may run without gpuguard: they turn Unavailable into a default.
"""

import itertools
import json
import logging
import math
import re
import socket
import time
from typing import Any, Dict, Optional, Union

from . import env as _env

__all__ = [
    "Error",
    "Unavailable",
    "Client",
    "Decision",
    "DEFAULT_TIMEOUT",
    "parse_size",
    "status",
    "step",
    "reserve",
    "request_reservation",
    "release",
    "report_oom",
    "ready",
]

log = logging.getLogger("gpuguard")

# DEFAULT_TIMEOUT bounds each request (connect, send and the reply) in
# seconds. The module-level functions read it at call time.
DEFAULT_TIMEOUT = 2.0

# step waits for gpuguard to write the state file and publish the event,
# which can take longer than a plain request.
STEP_TIMEOUT = 10.0

# MAX_LINE is the server's limit on a request line (64 KiB, not counting
# the newline); free-text fields are cut well below it.
MAX_LINE = 64 << 10
_MAX_TEXT = 8 << 10

PRIORITIES = ("P0", "P1", "P2")
DECISIONS = ("gpu", "cpu", "defer", "deny")

_ids = itertools.count(1)


class Error(Exception):
    """gpuguard refused a request ({"ok": false, ...}); reply holds the reply."""

    def __init__(self, message: str, reply: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.reply = reply or {}


class Unavailable(Error):
    """No gpuguard to ask: GPUGUARD_SOCKET is unset, the socket is gone, or
    it did not answer in time."""


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([KMGT]i?B|B)?\s*$")
_UNITS = {
    None: 1, "B": 1,
    "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
    "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
}


def parse_size(size: Union[int, float, str]) -> int:
    """Bytes from an int or a size string in gpuguard's syntax: "16GiB"
    (1024-based), "1.5GB" (1000-based), "4096". Fractions of a byte round
    up."""
    if isinstance(size, bool):
        raise ValueError("size must be a number of bytes or a size string, got %r" % (size,))
    if isinstance(size, int):
        return size
    if isinstance(size, float):
        if not math.isfinite(size):
            raise ValueError("size must be finite, got %r" % (size,))
        return int(math.ceil(size))
    if isinstance(size, str):
        m = _SIZE_RE.match(size)
        if m and m.group(2) in _UNITS:
            num = m.group(1)
            unit = _UNITS[m.group(2)]
            if "." in num:
                return int(math.ceil(float(num) * unit))
            return int(num) * unit
    raise ValueError("invalid size %r: want bytes or a number with KiB, MiB, GiB, TiB, KB, MB, GB or TB" % (size,))


_DURATION_RE = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)$")


def _ttl(ttl: Union[int, float, str]) -> str:
    """A Go duration string from seconds or a Go duration string."""
    if isinstance(ttl, bool):
        raise ValueError("ttl must be seconds or a Go duration such as \"60s\", got %r" % (ttl,))
    if isinstance(ttl, (int, float)):
        if not math.isfinite(ttl) or ttl <= 0:
            raise ValueError("ttl must be > 0, got %r" % (ttl,))
        return "%dms" % max(1, int(math.ceil(ttl * 1000)))
    if isinstance(ttl, str):
        # Compound durations ("1m30s") are left for the server to check.
        parts = re.findall(r"[0-9.]+[a-zµ]+", ttl)
        if parts and "".join(parts) == ttl and all(_DURATION_RE.match(p) for p in parts):
            return ttl
    raise ValueError("invalid ttl %r: want seconds or a Go duration such as \"60s\"" % (ttl,))


def _clip(text: str) -> str:
    if len(text) > _MAX_TEXT:
        return text[:_MAX_TEXT - 3] + "..."
    return text


class Client(object):
    """A strict client for one gpuguard socket.

    path defaults to $GPUGUARD_SOCKET (read when the client is made);
    timeout bounds each request in seconds. Each request uses its own
    connection, so a Client may be shared between threads.
    """

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.path = path if path is not None else _env.socket_path()
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)

    def request(self, obj: Dict[str, Any], timeout: Optional[float] = None) -> Dict[str, Any]:
        """Send one request and return its reply (with "ok" true).

        Raises Unavailable when there is no socket or no reply within the
        timeout, Error when gpuguard answers {"ok": false}.
        """
        if not self.path:
            raise Unavailable("not supervised by gpuguard: GPUGUARD_SOCKET is not set")
        rid = next(_ids)
        req = dict(obj)
        req["id"] = rid
        line = json.dumps(req, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(line) > MAX_LINE:
            raise ValueError("request is %d bytes; gpuguard takes at most %d a line" % (len(line), MAX_LINE))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as e:
            raise Unavailable("gpuguard socket: %s" % (e,))
        try:
            sock.settimeout(_remaining(deadline))
            sock.connect(self.path)
            sock.settimeout(_remaining(deadline))
            sock.sendall(line + b"\n")
            reply = _read_reply(sock, rid, deadline)
        except socket.timeout:
            raise Unavailable("gpuguard at %s did not answer %r in time" % (self.path, obj.get("type")))
        except OSError as e:
            raise Unavailable("gpuguard at %s: %s" % (self.path, e))
        finally:
            sock.close()
        if reply.get("ok") is not True:
            raise Error(str(reply.get("error") or "request refused"), reply)
        return reply

    def status(self) -> Dict[str, Any]:
        """The instance's status object (as in `gpuguard status --json`)."""
        return _strip(self.request({"type": "status"}))

    def step(self, direction: str, timeout: Optional[float] = None) -> str:
        """Ask for a profile change now ("down" or "up"); returns the new
        profile's name once the state file is written and the event sent.
        Error past either end of the ladder."""
        if direction not in ("down", "up"):
            raise ValueError('direction must be "down" or "up", got %r' % (direction,))
        reply = self.request({"type": "step", "direction": direction},
                             timeout=max(self.timeout, STEP_TIMEOUT) if timeout is None else timeout)
        return str(reply.get("profile", ""))

    def reserve(self, nbytes: Union[int, float, str], priority: str = "P1",
                tool: Optional[str] = None, ttl: Union[int, float, str] = "60s") -> "Decision":
        """Ask to use nbytes more GPU memory. Returns a Decision; only "gpu"
        carries a lease, which ends on release, after ttl or when the
        server exits."""
        req = _reserve_request(nbytes, priority, tool, ttl)
        reply = self.request(req)
        decision = reply.get("decision")
        if decision not in DECISIONS:
            raise Error("reserve: unexpected decision %r" % (decision,), reply)
        return Decision(decision, str(reply.get("lease") or ""), str(reply.get("reason") or ""), client=self)

    def release(self, lease: str) -> None:
        """End a lease early. Error for a lease gpuguard does not know
        (already released or expired)."""
        if not lease:
            raise ValueError("release: empty lease")
        self.request({"type": "release", "lease": lease})

    def report_oom(self, detail: str = "") -> None:
        """Tell gpuguard that this process is about to exit because it ran
        out of memory, so the exit counts as an OOM."""
        self.request({"type": "oom", "detail": _clip(str(detail))})

    def ready(self) -> None:
        """Tell gpuguard that the server has finished starting (its model is
        loaded and its memory sized): on a shared GPU the next server may
        start now instead of after `[watch] settle`."""
        self.request({"type": "ready"})


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


def _read_reply(sock: socket.socket, rid: int, deadline: float) -> Dict[str, Any]:
    """Read lines until the reply to request rid. A line without an id that
    says ok:false is the server refusing the connection (wrong uid, too many
    connections) and counts as the reply."""
    buf = b""
    while True:
        nl = buf.find(b"\n")
        while nl >= 0:
            raw, buf = buf[:nl], buf[nl + 1:]
            nl = buf.find(b"\n")
            if not raw.strip():
                continue
            try:
                msg = json.loads(raw.decode("utf-8"))
            except ValueError:
                raise OSError("malformed reply line %r" % (raw[:80],))
            if not isinstance(msg, dict) or "type" in msg:
                continue  # an event on a subscribed connection
            if msg.get("id") == rid or ("id" not in msg and msg.get("ok") is False):
                return msg
        if len(buf) > 4 * MAX_LINE:
            raise OSError("reply line too long")
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("connection closed before the reply")
        buf += chunk


def _strip(reply: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in reply.items() if k not in ("ok", "id")}


def _reserve_request(nbytes: Union[int, float, str], priority: str,
                     tool: Optional[str], ttl: Union[int, float, str]) -> Dict[str, Any]:
    n = parse_size(nbytes)
    if n <= 0:
        raise ValueError("reserve: nbytes must be > 0, got %r" % (nbytes,))
    if priority not in PRIORITIES:
        raise ValueError('reserve: priority must be "P0", "P1" or "P2", got %r' % (priority,))
    req: Dict[str, Any] = {"type": "reserve", "bytes": n, "priority": priority, "ttl": _ttl(ttl)}
    if tool:
        req["tool"] = _clip(str(tool))
    return req


class Decision(object):
    """gpuguard's answer to a reservation.

    decision is "gpu" (go ahead on the GPU; lease is held), "cpu" (run it
    on the CPU), "defer" (try again later) or "deny" (do not run it).
    Used as a context manager it releases a "gpu" lease on exit:

        with gpuguard.reserve(2 << 30, "P1", tool="embed") as d:
            device = "cuda" if d.gpu else "cpu"
    """

    __slots__ = ("decision", "lease", "reason", "_client", "_released")

    def __init__(self, decision: str, lease: str = "", reason: str = "",
                 client: Optional[Client] = None) -> None:
        if decision not in DECISIONS:
            raise ValueError("decision must be one of %s, got %r" % (", ".join(DECISIONS), decision))
        self.decision = decision
        self.lease = lease
        self.reason = reason
        self._client = client
        self._released = False

    @property
    def gpu(self) -> bool:
        """True when the work may use the GPU."""
        return self.decision == "gpu"

    @property
    def cpu(self) -> bool:
        return self.decision == "cpu"

    @property
    def deferred(self) -> bool:
        return self.decision == "defer"

    @property
    def denied(self) -> bool:
        return self.decision == "deny"

    def release(self) -> bool:
        """Release the lease (once; later calls do nothing). True when
        gpuguard confirmed; never raises."""
        if self._released or not self.lease:
            return False
        self._released = True
        return release(self.lease, client=self._client)

    def __enter__(self) -> "Decision":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return "Decision(%r, lease=%r, reason=%r)" % (self.decision, self.lease, self.reason)


# The module-level functions: safe whether or not gpuguard is there.

def _client(client: Optional[Client]) -> Client:
    return client if client is not None else Client()


def status(client: Optional[Client] = None) -> Optional[Dict[str, Any]]:
    """The instance's status object, or None when not supervised or
    gpuguard does not answer. Raises Error when gpuguard refuses."""
    try:
        return _client(client).status()
    except Unavailable as e:
        log.debug("status: %s", e)
        return None


def step(direction: str, client: Optional[Client] = None,
         timeout: Optional[float] = None) -> Optional[str]:
    """Ask gpuguard to step "down" or "up" now; returns the new profile's
    name, or None when not supervised or gpuguard does not answer. Raises
    Error when refused (past either end of the ladder)."""
    c = _client(client)
    try:
        return c.step(direction, timeout=timeout)
    except Unavailable as e:
        log.debug("step: %s", e)
        return None


def request_reservation(nbytes: Union[int, float, str], priority: str = "P1",
                        tool: Optional[str] = None, ttl: Union[int, float, str] = "60s",
                        client: Optional[Client] = None) -> Decision:
    """Ask to use nbytes (int or "2GiB") more GPU memory for a piece of
    work of the given priority (P0: must run on the GPU, P1: may fall back
    to the CPU, P2: may wait). Without gpuguard, or when it does not answer
    or refuses, the answer is "gpu" with no lease: the server behaves as it
    would unsupervised. Bad arguments raise ValueError."""
    req = _reserve_request(nbytes, priority, tool, ttl)  # validate even when unsupervised
    c = _client(client)
    if not c.path:
        return Decision("gpu", reason="not supervised")
    try:
        return c.reserve(req["bytes"], priority, tool, req["ttl"])
    except Unavailable as e:
        log.debug("reserve: %s", e)
        return Decision("gpu", reason="gpuguard unavailable: %s" % (e,))
    except Error as e:
        log.warning("gpuguard refused a reservation: %s", e)
        return Decision("gpu", reason="gpuguard refused the request: %s" % (e,))


reserve = request_reservation


def release(lease: str, client: Optional[Client] = None) -> bool:
    """Release a lease; True when gpuguard confirmed. Never raises: an
    expired lease or a missing gpuguard is nothing to release."""
    if not lease:
        return False
    try:
        _client(client).release(lease)
        return True
    except Error as e:
        log.debug("release %s: %s", lease, e)
        return False


def report_oom(detail: str = "", client: Optional[Client] = None) -> bool:
    """Tell gpuguard that the coming exit is an out-of-memory exit, so it
    restarts the server one profile lower. True when gpuguard acknowledged;
    never raises."""
    try:
        _client(client).report_oom(detail)
        return True
    except Error as e:
        log.debug("report_oom: %s", e)
        return False


def ready(client: Optional[Client] = None) -> bool:
    """Tell gpuguard that the server has finished starting: call it once
    the server answers (vLLM, SGLang and TGI: GET /health returns 200). On
    a GPU shared with other gpuguard instances the next one starts its
    server then, instead of after `[watch] settle` of flat memory. True
    when gpuguard acknowledged; never raises."""
    try:
        _client(client).ready()
        return True
    except Error as e:
        log.debug("ready: %s", e)
        return False
