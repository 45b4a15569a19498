"""Atomic checkpoints at $GPUGUARD_CHECKPOINT.

gpuguard copies the checkpoint to <checkpoint>.1 (shifting older
generations) before each restart and the restarted server finds it at the
same path. save_checkpoint never opens that path for writing: it writes a
temporary file beside it, fsyncs it, renames it over the checkpoint and
fsyncs the directory, so a crash at any point leaves either the old or the
new checkpoint, whole.
"""

import os
import stat
import tempfile
import time
from typing import BinaryIO, Callable, Optional, Union

from . import env as _env

__all__ = ["save_checkpoint", "load_checkpoint"]

Data = Union[bytes, bytearray, memoryview, str, Callable[[BinaryIO], object]]


def save_checkpoint(data: Data, path: Optional[str] = None) -> Optional[str]:
    """Replace the checkpoint atomically with data and return its path.

    data is bytes, a str (written as UTF-8) or a function that writes to
    the binary file it is given (for example
    ``lambda f: torch.save(state, f)``, which avoids holding a large
    checkpoint in memory twice). path defaults to $GPUGUARD_CHECKPOINT;
    with neither, nothing is written and None is returned. I/O errors
    (disk full, permissions) raise OSError and leave the old checkpoint as
    it was.
    """
    path = path or _env.checkpoint_path()
    if not path:
        return None
    path = os.path.abspath(path)
    d, base = os.path.split(path)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            # mkstemp makes 0600; keep the mode of the file being replaced.
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        except FileNotFoundError:
            pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(d)
    _sweep_stale(d, base)
    return path


# A writer killed mid-write leaves its temp file; one this old cannot
# belong to a write still in progress.
STALE_TEMP_SECONDS = 600


def _sweep_stale(d: str, base: str) -> None:
    """Remove temp files that killed writers left beside the checkpoint."""
    prefix = "." + base + "."
    cutoff = time.time() - STALE_TEMP_SECONDS
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        p = os.path.join(d, name)
        try:
            if os.lstat(p).st_mtime < cutoff:
                os.unlink(p)
        except OSError:
            pass


def _fsync_dir(d: str) -> None:
    """Make the rename durable. Some filesystems cannot fsync a directory;
    the rename is still atomic there."""
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_checkpoint(path: Optional[str] = None) -> Optional[bytes]:
    """The checkpoint's bytes, or None when there is none yet (or no path:
    not supervised and none given). Other I/O errors raise OSError."""
    path = path or _env.checkpoint_path()
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
