"""Deferred tasks: P2 work that gpuguard queues durably when memory is
short, and hands back to a handler when memory frees.

    import gpuguard

    d = gpuguard.defer({"doc": 42}, "2GiB", tool="embed")
    if d.gpu:          # memory now: run it here, under d's lease
        with d:
            embed(42)
    elif d.ticket:     # queued: gpuguard keeps it and delivers it later
        return {"status": "queued", "ticket": d.ticket}

    @gpuguard.task("embed")
    def embed_task(payload):
        embed(payload["doc"])      # raise to fail (it is retried with backoff)

    gpuguard.run_tasks()           # in a worker thread or process: blocks

Delivery is at least once: a task whose worker died, timed out or failed
runs again, so a handler must be safe to run twice.
"""

import json
import logging
import socket
import threading
from typing import Any, Callable, Dict, Optional, Union

from . import env as _env
from .client import (
    Client,
    Decision,
    Error,
    Unavailable,
    _client,
    _clip,
    _reserve_request,
)

__all__ = ["Deferral", "defer", "task", "run_tasks", "TaskRunner"]

log = logging.getLogger("gpuguard")


class Deferral(Decision):
    """A reservation with a payload. ticket is set when gpuguard stored the
    task (decision "defer"): it will be delivered to a task handler."""

    def __init__(self, decision: str, lease: str = "", reason: str = "", ticket: str = "",
                 client: Optional[Client] = None) -> None:
        Decision.__init__(self, decision, lease, reason, client=client)
        self.ticket = ticket

    @property
    def queued(self) -> bool:
        return bool(self.ticket)

    def __repr__(self) -> str:
        return "Deferral(%r, ticket=%r, reason=%r)" % (self.decision, self.ticket, self.reason)


def defer(payload: Any, nbytes: Union[int, float, str], tool: Optional[str] = None,
          ttl: Union[int, float, str] = "60s", client: Optional[Client] = None) -> Deferral:
    """Reserve nbytes at P2 for a task described by payload (any JSON value).
    The answer is "gpu" (run it now, under the lease), "defer" with a ticket
    (gpuguard stored the task before answering), or "deny" (the queue could
    not take it: reason says why). Without gpuguard the answer is "gpu" with
    no lease, as for reserve. Bad arguments raise ValueError."""
    req = _reserve_request(nbytes, "P2", tool, ttl)
    req["payload"] = payload
    line = json.dumps(req)  # a payload that is not JSON fails here, before anything is sent
    if len(line) > (64 << 10):
        raise ValueError("defer: the request is %d bytes; gpuguard takes at most 64 KiB a line" % len(line))
    c = _client(client)
    if not c.path:
        return Deferral("gpu", reason="not supervised")
    try:
        reply = c.request(req)
    except Unavailable as e:
        log.debug("defer: %s", e)
        return Deferral("gpu", reason="gpuguard unavailable: %s" % (e,))
    except Error as e:
        log.warning("gpuguard refused a deferral: %s", e)
        return Deferral("deny", reason="gpuguard refused the request: %s" % (e,))
    return Deferral(str(reply.get("decision")), str(reply.get("lease") or ""), str(reply.get("reason") or ""),
                    str(reply.get("ticket") or ""), client=c)


_handlers: Dict[str, Callable[[Any], Any]] = {}
_handlers_lock = threading.Lock()


def task(tool: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Register the decorated function as the handler of tasks of tool. It
    is called with the task's payload; returning is done, raising is
    failed (the error's text is kept with the task)."""
    def register(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        with _handlers_lock:
            _handlers[tool] = fn
        return fn
    return register


class TaskRunner(object):
    """Receives deferred tasks on one connection and runs them, one at a
    time: subscribe with tasks, then for each delivery call the handler
    and answer done or failed. stop() ends run() from another thread."""

    def __init__(self, handler: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 path: Optional[str] = None) -> None:
        self.handler = handler
        self.path = path if path is not None else _env.socket_path()
        self._sock: Optional[socket.socket] = None
        self._stopped = threading.Event()
        self._ids = 0

    def _dispatch(self, t: Dict[str, Any]) -> Any:
        if self.handler is not None:
            return self.handler(t)
        with _handlers_lock:
            fn = _handlers.get(str(t.get("tool", "")))
        if fn is None:
            raise LookupError("no handler for tool %r (register one with @gpuguard.task)" % (t.get("tool"),))
        return fn(t.get("payload"))

    def stop(self) -> None:
        self._stopped.set()
        s = self._sock
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self) -> None:
        """Run tasks until stop() or the connection ends. Raises Unavailable
        when there is no gpuguard to connect to."""
        if not self.path:
            raise Unavailable("not supervised by gpuguard: GPUGUARD_SOCKET is not set")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise Unavailable("gpuguard at %s: %s" % (self.path, e))
        self._sock = sock
        f = sock.makefile("rb")
        try:
            self._send({"type": "subscribe", "tasks": True})
            for raw in f:
                if self._stopped.is_set():
                    return
                try:
                    msg = json.loads(raw.decode("utf-8"))
                except ValueError:
                    continue
                if not isinstance(msg, dict) or msg.get("type") != "task":
                    continue  # replies and profile events
                self._run_one(msg)
        except OSError:
            if not self._stopped.is_set():
                raise
        finally:
            self._sock = None
            f.close()
            sock.close()

    def _run_one(self, t: Dict[str, Any]) -> None:
        ticket = str(t.get("ticket", ""))
        try:
            self._dispatch(t)
        except Exception as e:  # the handler's failure is the task's, not the runner's
            log.warning("deferred task %s (%s) failed: %s", ticket, t.get("tool"), e)
            self._send({"type": "failed", "ticket": ticket, "error": _clip("%s: %s" % (type(e).__name__, e))})
            return
        self._send({"type": "done", "ticket": ticket})

    def _send(self, obj: Dict[str, Any]) -> None:
        self._ids += 1
        obj = dict(obj, id=self._ids)
        assert self._sock is not None
        self._sock.sendall(json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n")


def run_tasks(handler: Optional[Callable[[Dict[str, Any]], Any]] = None,
              path: Optional[str] = None) -> None:
    """Run deferred tasks until the connection ends: handler(delivery) if
    given, else the @task handler of each delivery's tool (with its
    payload). Blocks; run it in a thread or a worker process."""
    TaskRunner(handler, path).run()
