"""Tell gpuguard about PyTorch out-of-memory errors.

gpuguard already recognises torch's OOM message on stderr. Reporting it on
the socket as well covers the cases the stderr scan misses: a server that
logs to a file, [oom] scan_stderr = false, an OOM that is caught and
followed by a plain sys.exit(1), or a process killed before it prints.

Two hooks, both cheap when nothing goes wrong:

* the CUDA caching allocator's OOM observer
  (torch._C._cuda_attach_out_of_memory_observer), called with (device,
  alloc, device_allocated, device_free) each time the allocator is about to
  raise OutOfMemoryError;
* sys.excepthook and threading.excepthook, wrapped to report an uncaught
  torch.OutOfMemoryError / torch.cuda.OutOfMemoryError (or an older
  torch's RuntimeError("CUDA out of memory ...")) before the process dies.
"""

import sys
import threading
from typing import Any, Optional, Tuple

from . import client as _client

__all__ = ["install_torch_oom_hook"]


class _Hook(object):
    def __init__(self) -> None:
        self.installed = False
        self.observer = False  # the allocator observer is attached
        self.eager = True
        self.reported = False
        self.last_oom = ""  # the observer's last report, for the excepthook's detail
        self.classes: Tuple[type, ...] = ()
        self.lock = threading.Lock()


_hook = _Hook()


def _report(detail: str) -> None:
    with _hook.lock:
        if _hook.reported:
            return  # the mark is for the coming exit; once is enough
        _hook.reported = True
    _client.report_oom(detail)


def _observer(device: int, alloc: int, device_allocated: int, device_free: int) -> None:
    # Called by the allocator with the GIL held; an exception here would be
    # rethrown inside the allocator, so nothing may escape.
    try:
        detail = ("CUDA out of memory on device %d: tried to allocate %d bytes "
                  "(%d allocated, %d free)" % (device, alloc, device_allocated, device_free))
        _hook.last_oom = detail
        if _hook.eager:
            _report(detail)
    except Exception:
        pass


def _find_oom(exc: Optional[BaseException]) -> Optional[BaseException]:
    """The OOM error in exc's chain (an OOM re-raised as another error
    counts), or None."""
    seen = 0
    while exc is not None and seen < 16:
        if _hook.classes and isinstance(exc, _hook.classes):
            return exc
        if type(exc).__name__ == "OutOfMemoryError":
            return exc
        if isinstance(exc, RuntimeError) and "out of memory" in str(exc):
            return exc  # torch before 1.13 raised a plain RuntimeError
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _check(exc: Optional[BaseException]) -> None:
    try:
        oom = _find_oom(exc)
        if oom is not None:
            msg = str(oom).strip().splitlines()
            detail = "%s: %s" % (type(oom).__name__, msg[0] if msg else "")
            _report(_hook.last_oom or detail)
    except Exception:
        pass


def _wrap_excepthooks() -> None:
    prev_sys = sys.excepthook

    def excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
        _check(exc)
        prev_sys(exc_type, exc, tb)

    sys.excepthook = excepthook

    prev_thread = getattr(threading, "excepthook", None)
    if prev_thread is not None:  # Python 3.8+
        def thread_excepthook(args: Any) -> None:
            _check(args.exc_value)
            prev_thread(args)

        threading.excepthook = thread_excepthook


def install_torch_oom_hook(eager: bool = True, observer: Optional[bool] = None) -> bool:
    """Report torch OOMs to gpuguard. Returns False (and does nothing) when
    torch is not installed; True otherwise. Safe to call more than once.

    eager (default): the allocator observer reports the first OOM at once,
    so the coming exit counts as OOM however the process then ends. A
    server that catches OOMs and carries on (failing one request, retrying
    smaller) should pass eager=False: only an uncaught OOM is reported.

    observer: attach the allocator observer. The default (None) attaches it
    only when CUDA is already initialised, because recent torch initialises
    CUDA to attach it (a context on the current device, and no more
    fork()ing workers) while older torch silently ignores an observer
    attached before initialisation. So call this after moving the model to
    the GPU, or pass True. The excepthooks are installed either way.
    Outside gpuguard the reports are no-ops.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # type: ignore
        except Exception:  # ImportError, or a broken install
            return False
    _hook.eager = eager
    if not _hook.installed:
        classes = []
        for owner, name in ((torch, "OutOfMemoryError"), (getattr(torch, "cuda", None), "OutOfMemoryError")):
            cls = getattr(owner, name, None) if owner is not None else None
            if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in classes:
                classes.append(cls)
        _hook.classes = tuple(classes)
        _wrap_excepthooks()
        _hook.installed = True
    if not _hook.observer:
        attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if observer is None:
            observer = _cuda_initialized(torch)
        if attach is not None and observer:
            try:
                attach(_observer)
                _hook.observer = True
            except Exception:
                pass  # no CUDA, or an allocator without observers (cudaMallocAsync)
    return True


def _cuda_initialized(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False
