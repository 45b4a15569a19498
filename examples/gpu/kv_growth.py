#!/usr/bin/env python3
"""A real PyTorch child whose GPU memory grows the way a KV cache does.

Each step allocates STEP_MB of "KV blocks" until CACHE_CAP_MB. On a live
profile change it drops blocks beyond the new cap and calls
torch.cuda.empty_cache(), so the memory really goes back to the driver.
With FRACTION set it limits itself with set_per_process_memory_fraction, to
show what happens without gpuguard: a real CUDA OOM.
For two tenants that must grow at the same time: READY=1 tells gpuguard the
child has started once its CUDA context is up (the next tenant may start),
and GO_FILE=PATH makes it wait (at most 120 s) until PATH exists before it
grows, printing "waiting for go" first.
Used by scripts/gpu-smoke.sh (sections 3 and 6).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import gpuguard  # noqa: E402

# Follow live changes before importing torch: a change that comes while it
# loads is delivered here, not lost (and the notify signal cannot kill us).
changes = []
gpuguard.on_change(changes.append)

import torch  # noqa: E402

MiB = 1 << 20


def main():
    frac = float(os.environ.get("FRACTION", "0"))
    if frac > 0:
        torch.cuda.set_per_process_memory_fraction(frac, 0)
    wait_to_start()
    steps = int(os.environ.get("STEPS", "40"))
    step_mb = int(os.environ.get("STEP_MB", "256"))
    cap = {"mb": int(os.environ.get("CACHE_CAP_MB", "100000"))}
    blocks = []
    for i in range(steps):
        while changes:
            p = changes.pop(0)
            cap["mb"] = int(p.env.get("CACHE_CAP_MB", cap["mb"]))
            keep = cap["mb"] // step_mb
            del blocks[keep:]
            torch.cuda.empty_cache()
            print(f"step {i}: live change to {p.name}: cache capped at {cap['mb']} MiB, "
                  f"{torch.cuda.memory_reserved() / MiB:.0f} MiB reserved", flush=True)
        if len(blocks) * step_mb < cap["mb"]:
            blocks.append(torch.empty(step_mb * MiB, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        print(f"step {i}: {len(blocks) * step_mb} MiB of cache, "
              f"{torch.cuda.memory_reserved() / MiB:.0f} MiB reserved", flush=True)
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.25")))
    print("survived", flush=True)


def wait_to_start():
    """READY and GO_FILE (see above)."""
    ready, go = os.environ.get("READY") == "1", os.environ.get("GO_FILE")
    if not (ready or go):
        return
    torch.empty(1, device="cuda")  # the CUDA context: what "started" means here
    torch.cuda.synchronize()
    if ready:
        gpuguard.ready()
    if go:
        print("waiting for go", flush=True)
        end = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < end:
            time.sleep(0.05)
        print(f"go at {time.time():.3f}", flush=True)


if __name__ == "__main__":
    main()
