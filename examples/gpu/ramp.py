#!/usr/bin/env python3
"""A real PyTorch child whose GPU memory grows at a steady rate, then stays flat.

It allocates BLOCK_MB every PERIOD_MS until TOTAL_MB, then holds its memory
for HOLD_S seconds and exits 0. Its SIGUSR1 handler goes in before torch is
imported (as in any server), so gpuguard's notify signal always reaches it;
each arrival is recorded. With SHRINK_MB >= 0 the first signal ends the ramp
and the child drops its blocks down to SHRINK_MB (and empties torch's cache),
as a server does on a live step down; then it holds.

Everything it does is one JSON line on stdout, with "t" (wall clock, to
compare with gpuguard's journal) and "m" (monotonic, for latencies):
  {"ev": "cuda"}                        the CUDA context is up
  {"ev": "alloc", "mib": N, "free": B, "m0": M}
                                        after each block: B from cudaMemGetInfo,
                                        M when its allocation began
  {"ev": "signal", ...}                 a SIGUSR1 arrival (times from the handler)
  {"ev": "flat", "mib": N}              the ramp is over: memory stays as it is
  {"ev": "done"}                        about to exit 0
READY=1 tells gpuguard the child has started once the CUDA context is up.
Plain allocations only (no managed memory). Used by scripts/gpu-smoke.sh
(sections 0, 7 and 8).
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import gpuguard  # noqa: E402

arrivals = []


def on_usr1(signum, frame):
    arrivals.append((time.time(), time.monotonic()))


signal.signal(signal.SIGUSR1, on_usr1)

import torch  # noqa: E402

MiB = 1 << 20


def emit(ev, t=None, m=None, **kw):
    rec = {"ev": ev, "t": time.time() if t is None else t, "m": time.monotonic() if m is None else m}
    rec.update(kw)
    print(json.dumps(rec), flush=True)


def main():
    block = int(os.environ.get("BLOCK_MB", "64"))
    period = float(os.environ.get("PERIOD_MS", "50")) / 1000
    total = int(os.environ.get("TOTAL_MB", "4096"))
    hold = float(os.environ.get("HOLD_S", "5"))
    shrink = int(os.environ.get("SHRINK_MB", "-1"))

    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    emit("cuda", free=torch.cuda.mem_get_info()[0])
    if os.environ.get("READY") == "1":
        gpuguard.ready()

    blocks = []
    seen = 0
    next_at = time.monotonic()
    while len(blocks) * block < total:
        m0 = time.monotonic()
        blocks.append(torch.empty(block * MiB, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        emit("alloc", mib=len(blocks) * block, free=torch.cuda.mem_get_info()[0], m0=m0)
        seen = report_signals(seen)
        if seen and shrink >= 0:
            del blocks[shrink // block:]
            torch.cuda.empty_cache()
            break
        next_at += period
        time.sleep(max(0.0, next_at - time.monotonic()))
    emit("flat", mib=len(blocks) * block, free=torch.cuda.mem_get_info()[0])
    end = time.monotonic() + hold
    while time.monotonic() < end:
        time.sleep(min(0.1, max(0.0, end - time.monotonic())))
        seen = report_signals(seen)
    emit("done")


def report_signals(seen):
    """Prints the arrivals since the last call; returns how many so far."""
    for t, m in arrivals[seen:]:
        emit("signal", t=t, m=m)
    return len(arrivals)


if __name__ == "__main__":
    main()
