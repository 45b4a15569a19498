#!/usr/bin/env python3
"""A stand-in model server for gpuguard's simulated GPU (stdlib only).

It behaves like a real inference server as far as gpuguard can tell:

* its GPU memory (written to $GPUGUARD_SIM_DIR/0/<pid>) is its weights, which
  depend on DTYPE, plus a KV cache that grows with load up to KV_CACHE_MB;
* it applies its profile's env at start (DTYPE, MAX_BATCH, KV_CACHE_MB);
* it follows live profile changes through the gpuguard client
  (clients/python: a socket subscription, with the notify signal as
  fallback) and shrinks to the new profile, the way a server frees KV
  cache blocks;
* before an optional tool call it asks gpuguard for admission
  (gpuguard.reserve) and runs the tool on the GPU or the CPU as told;
* at step DEMO_BURST_AT a long-context request needs DEMO_BURST_MB of
  activations at once; if that does not fit the device it prints a real
  PyTorch-style CUDA OOM traceback and exits 1, as torch would;
* it saves its progress with gpuguard.save_checkpoint (write, fsync,
  rename) and resumes from it after a restart.

It ends with exit 0 after DEMO_STEPS steps. Every knob has a default so the
README's demo runs with no setup.
"""

import json
import os
import signal
import sys
import threading
import time

# The client ships in this repository; a server installed elsewhere would
# `pip install ./clients/python` instead.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import gpuguard  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30

WEIGHTS = {"float16": 8 * GiB, "bfloat16": 8 * GiB, "int8": 4 * GiB, "int4": 2 * GiB}


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class Server:
    def __init__(self, changed, pending):
        self.changed = changed  # set by follow_changes
        self.pending = pending
        self.sim_dir = os.environ.get("GPUGUARD_SIM_DIR", "")
        self.total = env_int("DEMO_GPU_MEMORY", 16 * GiB)
        self.steps = env_int("DEMO_STEPS", 120)
        self.burst_at = env_int("DEMO_BURST_AT", 70)
        self.burst = env_int("DEMO_BURST_MB", 9 * 1024) * MiB
        self.tick = env_int("DEMO_TICK_MS", 100) / 1000.0
        self.step = 0
        self.served = 0
        self.kv = 0
        self.tool_at = env_int("DEMO_TOOL_AT", 90)
        self.apply(dict(os.environ), os.environ.get("GPUGUARD_PROFILE", "default"))

    def log(self, msg):
        print(f"[demo pid {os.getpid()} {self.profile}] {msg}", flush=True)

    def apply(self, env, profile):
        self.profile = profile
        self.dtype = env.get("DTYPE", "float16")
        self.batch = int(env.get("MAX_BATCH", "32"))
        self.kv_cap = int(env.get("KV_CACHE_MB", "8192")) * MiB
        self.weights = WEIGHTS.get(self.dtype, 8 * GiB)
        if self.kv > self.kv_cap:
            self.kv = self.kv_cap  # free the blocks beyond the new cap

    def apply_change(self):
        self.changed.clear()
        p = self.pending[0]
        env = dict(os.environ)
        env.update(p.env)
        before = self.used()
        self.apply(env, p.name)
        self.log(f"live change to {self.profile} ({p.reason}): "
                 f"dtype={self.dtype} batch={self.batch}, "
                 f"{before / GiB:.1f} GiB -> {self.used() / GiB:.1f} GiB")

    def used(self):
        return self.weights + self.kv

    def report(self, extra=0):
        if not self.sim_dir:
            return
        d = os.path.join(self.sim_dir, "0")
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            f.write(str(self.used() + extra))
        os.replace(tmp, os.path.join(d, str(os.getpid())))

    def load_checkpoint(self):
        data = gpuguard.load_checkpoint()
        if data is None:
            return
        ck = json.loads(data)
        if ck.get("step", 0) >= self.steps:
            self.log("the checkpoint is of a finished run; starting a new one")
            return
        self.step, self.served = ck["step"], ck["served"]
        self.log(f"restored checkpoint: step {self.step}, {self.served} requests served")

    def save_checkpoint(self):
        gpuguard.save_checkpoint(json.dumps({"step": self.step, "served": self.served}))

    def tool_call(self):
        # An optional tool (say, an embedding model) asks before it
        # allocates: gpuguard's policy decides GPU or CPU, not this code.
        want = 3 * GiB
        with gpuguard.reserve(want, "P1", tool="embed", ttl="30s") as d:
            self.log(f"tool call: reserve {want / GiB:.0f} GiB -> {d.decision} ({d.reason})")
            if d.gpu:
                self.report(want)

    def oom(self, want):
        free = self.total - self.used()
        sys.stderr.write(
            "Traceback (most recent call last):\n"
            '  File "examples/demo_server.py", line 1, in serve_long_context\n'
            "    attn = torch.empty((batch, heads, ctx, ctx), device=\"cuda\")\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            f"{want / GiB:.2f} GiB. GPU 0 has a total capacity of {self.total / GiB:.2f} GiB "
            f"of which {max(free, 0) / GiB:.2f} GiB is free. Of the allocated memory "
            f"{self.used() / GiB:.2f} GiB is allocated by PyTorch.\n")
        sys.stderr.flush()
        sys.exit(1)

    def run(self):
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
        self.load_checkpoint()
        self.log(f"serving: dtype={self.dtype} batch={self.batch} "
                 f"(restarts={os.environ.get('GPUGUARD_RESTARTS', '0')}, "
                 f"last exit={os.environ.get('GPUGUARD_LAST_EXIT', 'none')})")
        while self.step < self.steps:
            if self.changed.is_set():
                self.apply_change()
            self.step += 1
            self.served += self.batch
            # Load fills the KV cache: 8 MiB per sequence in the batch.
            self.kv = min(self.kv_cap, self.kv + self.batch * 8 * MiB)
            if self.step == self.tool_at:
                self.tool_call()
            if self.step == self.burst_at:
                # This request bypasses admission, as servers without
                # gpuguard's client do: it allocates and hopes.
                self.log(f"long-context request: {self.burst / GiB:.1f} GiB of activations")
                if self.used() + self.burst > self.total:
                    self.report(self.burst)
                    self.oom(self.burst)
                self.report(self.burst)
            else:
                self.report()
            if self.step % 10 == 0:
                self.save_checkpoint()
                self.log(f"step {self.step}: {self.used() / GiB:.1f} GiB used, {self.served} served")
            time.sleep(self.tick)
        self.save_checkpoint()
        self.log(f"done: {self.step} steps, {self.served} requests served")


def follow_changes():
    """Follow live changes: the first thing a server does, before it loads
    anything (a real one would import torch and load weights next). A change
    gpuguard made before this is delivered now. The callback runs on the
    client's thread: it hands the profile over, the loop applies it."""
    changed, pending = threading.Event(), [None]

    def on_change(profile):
        pending[0] = profile
        changed.set()

    gpuguard.on_change(on_change)
    return changed, pending


if __name__ == "__main__":
    Server(*follow_changes()).run()
