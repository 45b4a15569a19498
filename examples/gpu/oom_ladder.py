#!/usr/bin/env python3
"""A real PyTorch child that hits a real CUDA OOM in its first profile.

It caps itself with torch.cuda.set_per_process_memory_fraction(FRACTION),
saves a checkpoint, then allocates ALLOC_MB (from its profile). In the
first profile that exceeds the cap: torch raises torch.OutOfMemoryError,
the traceback goes to stderr and the process exits 1; gpuguard classifies
it from the traceback and restarts it one profile lower, where it restores
the checkpoint and succeeds. Used by scripts/gpu-smoke.sh.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import gpuguard  # noqa: E402
import torch  # noqa: E402

MiB = 1 << 20

torch.cuda.set_per_process_memory_fraction(float(os.environ["FRACTION"]), 0)
prev = gpuguard.load_checkpoint()
print(f"profile {gpuguard.profile().name} last_exit={gpuguard.last_exit()} "
      f"checkpoint={prev.decode() if prev else None}", flush=True)
gpuguard.save_checkpoint(json.dumps({"profile": gpuguard.profile().name, "t": time.time()}))
x = torch.empty(int(os.environ["ALLOC_MB"]) * MiB, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(f"allocated {x.numel() / MiB:.0f} MiB: ok", flush=True)
