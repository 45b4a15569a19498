"""Live profile changes: on_change(callback).

gpuguard announces a live change three ways, in this order: it rewrites the
state file, sends the notify signal (SIGUSR1 unless the policy's [notify]
says otherwise) to the server's main process, and publishes a "profile"
event to socket subscribers. A Watcher uses two of them:

* a daemon thread holding a {"type":"subscribe"} connection, which
  reconnects with backoff when the connection drops and re-reads the state
  file after each (re)subscription so nothing is missed in between;
* a handler for the notify signal, which re-reads the state file. It only
  delivers while the thread is not subscribed (no socket, or between
  reconnects); otherwise the event follows within milliseconds and the
  callback runs on the thread.

Both dedupe by the state's "seq", so each change is delivered once.

A change can come before on_change is called: servers import their
framework first, and gpuguard does not send the notify signal to a process
that has no handler for it (its default action would end the process).
So when a Watcher starts it compares the state file with the profile the
process was started in (GPUGUARD_PROFILE and GPUGUARD_LEVEL, which never
change for a process), and delivers the state file's profile if it differs:
that is a change the process has not been told about. The environment is
the baseline, not the state file at import or at the call, because only the
environment is certain to predate every change.
"""

import json
import logging
import os
import select
import signal as _signal
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from . import client as _client
from . import env as _env

__all__ = ["Watcher", "on_change"]

log = logging.getLogger("gpuguard")

# Reconnect backoff, in seconds: doubles from the first to the second.
BACKOFF_MIN = 0.05
BACKOFF_MAX = 5.0

Callback = Callable[[_env.Profile], Any]

# Signal handlers are process-wide: one dispatcher per signal number calls
# every live Watcher, then the handler it replaced.
_dispatch_lock = threading.Lock()
_dispatch: Dict[int, List["Watcher"]] = {}
_previous: Dict[int, Any] = {}


class Watcher(object):
    """Delivers live profile changes to a callback; see on_change.

    current is the last profile delivered (or the one at start); stop()
    ends the thread and detaches from the signal handler. started is the
    profile the process was started in (from the environment), or None
    when unknown: then the state file when the Watcher starts is taken as
    already known.
    """

    def __init__(self, callback: Callback, signum: Optional[int] = None,
                 socket_path: Optional[str] = None, state_path: Optional[str] = None,
                 timeout: Optional[float] = None, started: Optional[_env.Profile] = None) -> None:
        self._callback = callback
        self._signum = signum
        self._socket_path = socket_path
        self._state_path = state_path
        self._timeout = _client.DEFAULT_TIMEOUT if timeout is None else timeout
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        # stop() writes to _wake_w to end the thread's wait for events.
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._thread: Optional[threading.Thread] = None
        self._started = started
        self.current: Optional[_env.Profile] = started
        self._seq: Optional[int] = None
        self.signal_installed = False

    # Lifecycle.

    def start(self) -> "Watcher":
        """Install the handler, apply a change made before it was in, then
        subscribe. The callback for a missed change runs here, on the
        calling thread, before start returns."""
        if self._signum is not None:
            self.signal_installed = _attach_signal(self, self._signum)
        # After the handler is in: a change from now on is signalled.
        self._reread(first_look=True)
        if self._socket_path:
            self._wake_r, self._wake_w = socket.socketpair()
            self._thread = threading.Thread(target=self._run, name="gpuguard-subscribe", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: Optional[float] = 2.0) -> None:
        """Stop delivering. The signal handler stays installed (with no
        watcher it only chains to the previous handler), so a late notify
        signal never falls back to its default action, which ends the
        process."""
        self._stop.set()
        if self._signum is not None:
            _detach_signal(self, self._signum)
        if self._wake_w is not None:
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
            if not t.is_alive():
                for s in (self._wake_r, self._wake_w):
                    if s is not None:
                        s.close()

    @property
    def subscribed(self) -> bool:
        """True while the thread holds a live subscription and has caught
        up with the state file."""
        return self._subscribed.is_set()

    def wait_subscribed(self, timeout: Optional[float] = None) -> bool:
        """Wait until the thread has subscribed and caught up with the state
        file (for tests and start-up ordering); False on timeout or when
        there is no socket."""
        if self._thread is None:
            return False
        return self._subscribed.wait(timeout)

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # Delivery.

    def _deliver(self, p: Optional[_env.Profile], first_look: bool = False) -> bool:
        """Call the callback for p unless its seq was already delivered.
        first_look: p is read from the state file and nothing has been seen
        yet; it is delivered only if it is a change the process missed (it
        differs from the profile the process started in), else it becomes
        the baseline. The lock covers only the seq check, never the
        callback, so the signal path cannot block behind a slow callback on
        the thread."""
        if p is None or self._stop.is_set():
            return False
        # The signal path runs on the main thread; were the main thread
        # itself inside this section (a nested signal), waiting would never
        # end, so give up after a while: the thread or a re-read catches up.
        if not self._lock.acquire(timeout=1.0):
            return False
        try:
            if p.seq is not None and self._seq is not None and p.seq <= self._seq:
                return False
            if first_look and self._seq is None and not self._missed(p):
                # Nothing new: this is where we start.
                self._seq = p.seq
                self.current = p
                return False
            if p.seq is not None:
                self._seq = p.seq
            self.current = p
        finally:
            self._lock.release()
        try:
            self._callback(p)
        except Exception:
            log.exception("gpuguard: on_change callback failed")
        return True

    def _missed(self, p: _env.Profile) -> bool:
        """Whether state p is a change from the profile the process started
        in (never, when that is unknown)."""
        s = self._started
        return s is not None and (p.name, p.level) != (s.name, s.level)

    def _reread(self, first_look: bool = False) -> bool:
        if not self._state_path:
            return False
        return self._deliver(_env.read_state(self._state_path), first_look)

    def _on_signal(self) -> None:
        if self._stop.is_set() or self._subscribed.is_set():
            return  # the subscription delivers this change
        self._reread()

    # The subscriber thread.

    def _run(self) -> None:
        delay = BACKOFF_MIN
        while not self._stop.is_set():
            try:
                if self._session():
                    delay = BACKOFF_MIN
            except Exception:  # never let the thread die
                log.exception("gpuguard: subscriber failed")
            self._subscribed.clear()
            if self._stop.wait(delay):
                break
            delay = min(delay * 2, BACKOFF_MAX)

    def _session(self) -> bool:
        """One subscription: connect, subscribe, deliver events until the
        connection ends. True when it got as far as subscribing."""
        rid = next(_client._ids)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            reader = _LineReader(sock, self._wake_r)
            deadline = time.monotonic() + self._timeout
            try:
                sock.settimeout(self._timeout)
                sock.connect(self._socket_path)
                sock.sendall(json.dumps({"type": "subscribe", "id": rid}).encode() + b"\n")
                while True:
                    msg = reader.next(deadline)
                    if msg is None:
                        return False
                    if msg.get("type") == "profile":
                        self._event(msg)  # cannot come first, but harmless
                        continue
                    if msg.get("id") == rid or "id" not in msg:
                        if msg.get("ok") is not True:
                            log.debug("gpuguard: subscribe refused: %s", msg.get("error"))
                            return False
                        break
            except OSError as e:  # socket.timeout included
                log.debug("gpuguard: subscribe: %s", e)
                return False
            # Changes made while not subscribed are in the state file; the
            # events after the subscription wait in the socket meanwhile.
            # Until this re-read is done the signal path still delivers.
            self._reread(first_look=True)
            self._subscribed.set()
            while True:
                try:
                    msg = reader.next(None)  # events come whenever they come
                except OSError as e:
                    log.debug("gpuguard: subscription: %s", e)
                    return True
                if msg is None:
                    return True  # stopped, gpuguard went away, or it dropped us
                if msg.get("type") == "profile":
                    self._event(msg)
                elif msg.get("ok") is False and "id" not in msg:
                    # Dropped as a slow subscriber: resubscribe, re-read.
                    log.debug("gpuguard: subscription ended: %s", msg.get("error"))
                    return True
        finally:
            self._subscribed.clear()
            sock.close()

    def _event(self, msg: Dict[str, Any]) -> None:
        p = _env._profile_from(msg, _env._levels(None))
        if p is None:
            log.debug("gpuguard: ignoring malformed profile event %r", msg)
            return
        self._deliver(p)


class _LineReader(object):
    """JSON objects from a socket, one a line. next returns None at the end
    of the stream or once wake is readable (the Watcher is stopping), and
    raises socket.timeout past deadline. Lines that are not JSON objects
    are skipped."""

    def __init__(self, sock: socket.socket, wake: socket.socket) -> None:
        self._sock = sock
        self._wake = wake
        self._buf = b""

    def next(self, deadline: Optional[float]) -> Optional[Dict[str, Any]]:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                raw, self._buf = self._buf[:nl], self._buf[nl + 1:]
                try:
                    msg = json.loads(raw.decode("utf-8"))
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    return msg
                continue
            if len(self._buf) > 4 * _client.MAX_LINE:
                raise OSError("line too long from gpuguard")
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise socket.timeout("timed out")
            ready, _, _ = select.select([self._sock, self._wake], [], [], wait)
            if self._wake in ready:
                return None
            if not ready:
                raise socket.timeout("timed out")
            self._sock.setblocking(False)
            try:
                chunk = self._sock.recv(65536)
            except BlockingIOError:
                continue
            finally:
                self._sock.setblocking(True)
            if not chunk:
                return None
            self._buf += chunk


def _handler(signum: int, frame: Any) -> None:
    # No lock here: the handler runs on the main thread, which may be
    # holding _dispatch_lock. Writers replace the lists, never mutate them.
    watchers = _dispatch.get(signum, ())
    prev = _previous.get(signum)
    for w in watchers:
        try:
            w._on_signal()
        except Exception:
            log.exception("gpuguard: notify signal handler failed")
    if callable(prev):
        prev(signum, frame)


def _attach_signal(w: Watcher, signum: int) -> bool:
    """Register w for signum, installing the dispatcher if needed. Only the
    main thread may install a handler; elsewhere this returns False (and
    the caller must make sure the signal does not kill the process)."""
    with _dispatch_lock:
        if signum in _dispatch:
            _dispatch[signum] = _dispatch[signum] + [w]
            return True
    if threading.current_thread() is not threading.main_thread():
        log.warning("gpuguard: on_change called outside the main thread: no handler for signal %d "
                    "(install one in the main thread, or the notify signal ends the process)", signum)
        return False
    try:
        prev = _signal.getsignal(signum)
        _signal.signal(signum, _handler)
    except (ValueError, OSError) as e:
        log.warning("gpuguard: cannot handle signal %d: %s", signum, e)
        return False
    with _dispatch_lock:
        _previous[signum] = prev if prev is not _handler else None
        _dispatch[signum] = _dispatch.get(signum, []) + [w]
    return True


def _detach_signal(w: Watcher, signum: int) -> None:
    with _dispatch_lock:
        ws = _dispatch.get(signum)
        if ws and w in ws:
            _dispatch[signum] = [x for x in ws if x is not w]


def _started_profile() -> Optional[_env.Profile]:
    """The profile this process was started in (GPUGUARD_PROFILE and
    GPUGUARD_LEVEL), or None when the environment does not say."""
    name = os.environ.get("GPUGUARD_PROFILE")
    try:
        level = int(os.environ.get("GPUGUARD_LEVEL", ""))
    except ValueError:
        return None
    if not name or level < 0:
        return None
    return _env.Profile(name, level, max(_env._levels(None) or 1, level + 1))


def on_change(callback: Callback, signum: Optional[int] = getattr(_signal, "SIGUSR1", None),
              timeout: Optional[float] = None) -> Watcher:
    """Call callback(profile) after each live profile change.

    Make it the first thing your server does, before it imports its
    framework (torch, vllm) or loads a model: memory fills fastest while a
    server loads, and that is when the first change comes. A change made
    before the call is not lost: gpuguard does not signal a process that
    has no handler yet, and on_change delivers the state file's profile,
    once, from this call, when it differs from the profile the process was
    started in (GPUGUARD_PROFILE). The profile the process started in is
    not delivered (read profile()).

    The callback normally runs on a daemon thread that subscribes to
    gpuguard's socket. When the socket is unavailable it runs instead from
    the handler of signum (default SIGUSR1, gpuguard's default notify
    signal; pass the policy's [notify] signal if it differs, or None for no
    handler), that is on the main thread between two bytecodes of whatever
    it was doing. Either way, keep the callback short: record the profile
    or set a flag, and act on it from your own loop.

    Call it from the main thread so the handler can be installed (without
    one, gpuguard leaves the change to the state file and the socket).
    Outside gpuguard it does nothing and returns an inert Watcher. Each
    change is delivered once, per Watcher.
    """
    if not callable(callback):
        raise TypeError("on_change: callback must be callable")
    if not _env.supervised():
        return Watcher(callback)
    return Watcher(callback, signum=signum, socket_path=_env.socket_path(),
                   state_path=_env.state_path(), timeout=timeout, started=_started_profile()).start()
