"""The server that test_e2e runs under the real gpuguard.

First start (GPUGUARD_RESTARTS=0): record what the client sees, make
reservations, announce "ready", wait for the live change the test makes
with `gpuguard step`, save a checkpoint, report an OOM and exit 1.
After the restart: record the new profile, the last exit and the
checkpoint, then exit 0 so gpuguard ends with 0.

Results go to $E2E_OUT/<phase>.json, written atomically. With E2E_MODE=signal
the client has no socket and follows changes through SIGUSR1 alone.

E2E_MODE=late is a server that calls on_change late, as one that imports
its framework first: it writes "waiting", calls on_change only once the
test has made a change and created $E2E_OUT/go, writes "ready" with what
on_change delivered, waits for one more change and writes "first".
"""

import json
import os
import sys
import threading
import time

import gpuguard

GiB = 1 << 30
OUT = os.environ["E2E_OUT"]
MODE = os.environ.get("E2E_MODE", "socket")


def write(name, obj):
    tmp = os.path.join(OUT, "." + name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, os.path.join(OUT, name + ".json"))


def wait(pred, timeout):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)  # poll; the signal handler runs between sleeps
    return True


def follow_changes(res):
    changes = []
    got = threading.Event()

    def on_change(p):
        changes.append(dict(p.as_dict(), main_thread=threading.current_thread() is threading.main_thread()))
        got.set()

    w = gpuguard.on_change(on_change)
    res["signal_installed"] = w.signal_installed
    if MODE == "socket":
        res["subscribed"] = w.wait_subscribed(5)
    return changes, got


def first_start():
    res = {
        "pid": os.getpid(),
        "supervised": gpuguard.supervised(),
        "profile": gpuguard.profile().as_dict(),
        "restarts": gpuguard.restarts(),
        "last_exit": gpuguard.last_exit(),
        "checkpoint_path": gpuguard.checkpoint_path(),
        "max_batch": gpuguard.profile().get("MAX_BATCH"),
    }
    if MODE == "signal":
        os.environ.pop("GPUGUARD_SOCKET", None)
    else:
        st = gpuguard.status()
        res["status"] = {k: st.get(k) for k in ("name", "child_pid", "state", "profile", "level", "levels", "leases")}
        fits = gpuguard.reserve(GiB, "P1", tool="small")
        res["leases_held"] = gpuguard.status()["leases"]
        res["fits"] = [fits.decision, bool(fits.lease)]
        res["over"] = {}
        for prio in ("P0", "P1", "P2"):
            d = gpuguard.reserve(64 * GiB, prio, tool="huge-" + prio)
            res["over"][prio] = [d.decision, d.lease]
        res["released"] = fits.release()
        res["leases_after"] = gpuguard.status()["leases"]
        with gpuguard.reserve("2GiB", "P2") as d:
            res["with_gpu"] = d.gpu
        res["leases_after_with"] = gpuguard.status()["leases"]
    changes, got = follow_changes(res)
    write("ready", res)
    res["changed"] = wait(got.is_set, 15)
    res["changes"] = changes
    res["profile_after"] = gpuguard.profile().as_dict()
    if MODE == "signal":
        write("first", res)
        return 0
    gpuguard.save_checkpoint(b"phase one")
    res["oom_acked"] = gpuguard.report_oom("e2e: pretend CUDA ran out")
    write("first", res)
    return 1


def late_on_change():
    write("waiting", {"pid": os.getpid(), "restarts": gpuguard.restarts()})
    wait(lambda: os.path.exists(os.path.join(OUT, "go")), 60)
    changes = []
    w = gpuguard.on_change(lambda p: changes.append(p.as_dict()))
    res = {"at_call": list(changes), "signal_installed": w.signal_installed,
           "subscribed": w.wait_subscribed(5)}
    write("ready", res)
    res["changed"] = wait(lambda: len(changes) >= 2, 15)
    res["changes"] = changes
    res["restarts"] = gpuguard.restarts()
    write("first", res)
    return 0


def after_restart():
    res = {
        "profile": gpuguard.profile().as_dict(),
        "env_profile": os.environ.get("GPUGUARD_PROFILE"),
        "restarts": gpuguard.restarts(),
        "last_exit": gpuguard.last_exit(),
        "checkpoint": (gpuguard.load_checkpoint() or b"").decode(),
        "max_batch": gpuguard.profile().get("MAX_BATCH"),
    }
    write("second", res)
    return 0


if __name__ == "__main__":
    if MODE == "late":
        sys.exit(late_on_change())
    sys.exit(first_start() if gpuguard.restarts() == 0 else after_restart())
