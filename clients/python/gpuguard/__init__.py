"""gpuguard: the client for servers that gpuguard supervises.

A server started by ``gpuguard run`` learns its profile from the
environment and the state file, follows live profile changes, reserves GPU
memory for optional work, reports out-of-memory exits and keeps an atomic
checkpoint. Every call is harmless without gpuguard (GPUGUARD_SOCKET unset,
or the socket gone): it does nothing or returns what an unsupervised server
would assume.

    import gpuguard

    gpuguard.on_change(lambda p: changes.append(p))   # live changes: first
    import torch
    batch = int(gpuguard.profile().get("MAX_BATCH", "32"))
    with gpuguard.reserve("2GiB", "P1", tool="embed") as d:
        device = "cuda" if d.gpu else "cpu"

Standard library only; Python 3.8+.
"""

from .checkpoint import load_checkpoint, save_checkpoint
from .client import (
    Client,
    Decision,
    Error,
    Unavailable,
    parse_size,
    ready,
    release,
    report_oom,
    request_reservation,
    reserve,
    status,
    step,
)
from .env import (
    Profile,
    checkpoint_path,
    last_exit,
    profile,
    read_state,
    restarts,
    supervised,
)
from .tasks import Deferral, TaskRunner, defer, run_tasks, task
from .torchhook import install_torch_oom_hook
from .watch import Watcher, on_change

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Decision",
    "Deferral",
    "Error",
    "Profile",
    "TaskRunner",
    "Unavailable",
    "Watcher",
    "checkpoint_path",
    "defer",
    "install_torch_oom_hook",
    "last_exit",
    "load_checkpoint",
    "on_change",
    "parse_size",
    "profile",
    "read_state",
    "ready",
    "release",
    "report_oom",
    "request_reservation",
    "reserve",
    "restarts",
    "run_tasks",
    "save_checkpoint",
    "status",
    "step",
    "supervised",
    "task",
]
