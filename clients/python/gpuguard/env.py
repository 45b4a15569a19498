"""What gpuguard tells its child through the environment and the state file.

Everything here reads; nothing talks to the socket. Outside gpuguard every
function returns a default (profile "default", level 0 of 1, no restarts)
so a server runs the same with or without a supervisor.
"""

import json
import os
from typing import Dict, Mapping, Optional

__all__ = [
    "Profile",
    "supervised",
    "profile",
    "restarts",
    "last_exit",
    "checkpoint_path",
    "socket_path",
    "state_path",
    "parse_state",
    "read_state",
]


class Profile(object):
    """One rung of the policy's profile ladder.

    name, level (0-based, 0 = best quality) and levels (ladder length) place
    it; env is the profile's own env table from the policy (only those keys,
    not the whole process environment); seq is the state file's change
    counter (None when the profile came from the environment alone) and
    reason why gpuguard chose it.
    """

    __slots__ = ("name", "level", "levels", "env", "seq", "reason")

    def __init__(
        self,
        name: str,
        level: int = 0,
        levels: int = 1,
        env: Optional[Mapping[str, str]] = None,
        seq: Optional[int] = None,
        reason: str = "",
    ) -> None:
        self.name = name
        self.level = level
        self.levels = levels
        self.env: Dict[str, str] = dict(env or {})
        self.seq = seq
        self.reason = reason

    def get(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """Return the profile's value for key, else the process
        environment's, else default.

        After a live change os.environ still holds the values the process
        started with, so read tunables through this rather than os.environ.
        """
        if key in self.env:
            return self.env[key]
        return os.environ.get(key, default)

    @property
    def lowest(self) -> bool:
        """True at the last (most frugal) profile: nothing lower to step to."""
        return self.level >= self.levels - 1

    def as_dict(self) -> Dict[str, object]:
        return {
            "name": self.name,
            "level": self.level,
            "levels": self.levels,
            "env": dict(self.env),
            "seq": self.seq,
            "reason": self.reason,
        }

    def __eq__(self, other):
        if not isinstance(other, Profile):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # mutable

    def __repr__(self):
        return "Profile(name=%r, level=%d, levels=%d, env=%r, seq=%r, reason=%r)" % (
            self.name, self.level, self.levels, self.env, self.seq, self.reason)


def _env(environ: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _int(value: object, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def supervised(environ: Optional[Mapping[str, str]] = None) -> bool:
    """True when this process was started by gpuguard (GPUGUARD_NAME is set)."""
    return bool(_env(environ).get("GPUGUARD_NAME"))


def socket_path(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The control socket ($GPUGUARD_SOCKET), or None."""
    return _env(environ).get("GPUGUARD_SOCKET") or None


def state_path(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The state file ($GPUGUARD_STATE), or None."""
    return _env(environ).get("GPUGUARD_STATE") or None


def checkpoint_path(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The checkpoint file ($GPUGUARD_CHECKPOINT; it may not exist yet), or None."""
    return _env(environ).get("GPUGUARD_CHECKPOINT") or None


def restarts(environ: Optional[Mapping[str, str]] = None) -> int:
    """How many times gpuguard restarted the server in this run (0 outside gpuguard)."""
    return max(_int(_env(environ).get("GPUGUARD_RESTARTS"), 0), 0)


def last_exit(environ: Optional[Mapping[str, str]] = None) -> str:
    """Why the previous instance ended: "none", "oom", "crash" or "watermark"."""
    return _env(environ).get("GPUGUARD_LAST_EXIT") or "none"


def parse_state(text: str, levels: Optional[int] = None) -> Optional[Profile]:
    """Parse the state file's JSON; None when it is not a valid state.

    The state file does not carry the ladder length; levels supplies it
    (GPUGUARD_LEVELS), and defaults to just enough to hold the level.
    """
    try:
        st = json.loads(text)
    except ValueError:
        return None
    return _profile_from(st, levels)


def _profile_from(st: object, levels: Optional[int]) -> Optional[Profile]:
    """A Profile from a state object or a "profile" event, or None."""
    if not isinstance(st, dict):
        return None
    name = st.get("profile")
    level = st.get("level", 0)
    seq = st.get("seq")
    env = st.get("env")
    if env is None:
        env = {}
    if not isinstance(name, str) or not name:
        return None
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        return None
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
        return None
    if not isinstance(env, dict):
        return None
    env = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in env.items()}
    reason = st.get("reason")
    if not isinstance(reason, str):
        reason = ""
    if levels is None or levels <= level:
        levels = level + 1
    return Profile(name, level, levels, env, seq, reason)


def _levels(environ: Optional[Mapping[str, str]]) -> Optional[int]:
    n = _int(_env(environ).get("GPUGUARD_LEVELS"), 0)
    return n if n > 0 else None


def read_state(path: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> Optional[Profile]:
    """Read the state file (default $GPUGUARD_STATE); None when there is
    none or it cannot be read or parsed. gpuguard replaces it atomically,
    so a read never sees half a file."""
    path = path or state_path(environ)
    if not path:
        return None
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    return parse_state(text, _levels(environ))


def profile(environ: Optional[Mapping[str, str]] = None) -> Profile:
    """The current profile.

    From the state file when it is readable (it follows live changes), else
    from GPUGUARD_PROFILE, GPUGUARD_LEVEL and GPUGUARD_LEVELS with an empty
    env (the environment does not say which variables came from the
    profile; Profile.get falls back to os.environ). Outside gpuguard:
    Profile("default", 0, 1).
    """
    p = read_state(environ=environ)
    if p is not None:
        return p
    e = _env(environ)
    level = max(_int(e.get("GPUGUARD_LEVEL"), 0), 0)
    levels = _levels(environ) or 1
    if levels <= level:
        levels = level + 1
    return Profile(e.get("GPUGUARD_PROFILE") or "default", level, levels)
