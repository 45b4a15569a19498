#!/usr/bin/env python3
"""Detection latency with real NVML: the time from a real allocation that
crosses the watermark to gpuguard's notify signal arriving here.

Each round allocates BLOCK_MB (usage crosses `high`), records when the
allocation completed, waits for SIGUSR1 and records its arrival, frees the
block and steps back up through the socket. Prints median and max.
Used by scripts/gpu-smoke.sh.
"""
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import gpuguard  # noqa: E402

MiB = 1 << 20
got = threading.Event()
arrived = [0.0]


def on_usr1(signum, frame):
    arrived[0] = time.monotonic()
    got.set()


# The handler goes in before torch is imported, as in any server.
signal.signal(signal.SIGUSR1, on_usr1)

import torch  # noqa: E402

torch.empty(1, device="cuda")  # CUDA context first
torch.cuda.synchronize()
time.sleep(1)
lat = []
for _ in range(int(os.environ.get("ROUNDS", "20"))):
    got.clear()
    x = torch.empty(int(os.environ["BLOCK_MB"]) * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    t0 = time.monotonic()
    if not got.wait(5):
        print("no signal within 5s", flush=True)
        break
    lat.append((arrived[0] - t0) * 1000)
    del x
    torch.cuda.empty_cache()
    time.sleep(0.3)  # let a sample see the lower usage
    gpuguard.step("up")
    time.sleep(0.3)
if lat:
    print(f"DETECTION n={len(lat)} median={statistics.median(lat):.1f}ms max={max(lat):.1f}ms "
          f"min={min(lat):.1f}ms", flush=True)
