#!/usr/bin/env python3
"""A stand-in model server for gpuguard's simulated GPU (stdlib only).

It behaves like a real inference server as far as gpuguard can tell:

* its GPU memory (written to $GPUGUARD_SIM_DIR/0/<pid>) is its weights, which
  depend on DTYPE, plus a KV cache that grows with load up to KV_CACHE_MB;
* it applies its profile's env at start (DTYPE, MAX_BATCH, KV_CACHE_MB);
* on the notify signal (SIGUSR1) it re-reads $GPUGUARD_STATE and shrinks
  to the new profile, the way a server frees KV cache blocks;
* at step DEMO_BURST_AT a long-context request needs DEMO_BURST_MB of
  activations at once; if that does not fit the device it prints a real
  PyTorch-style CUDA OOM traceback and exits 1, as torch would;
* it saves its progress to $GPUGUARD_CHECKPOINT (write, fsync, rename) and
  resumes from it after a restart.

It ends with exit 0 after DEMO_STEPS steps. Every knob has a default so the
README's demo runs with no setup.
"""

import json
import os
import signal
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

WEIGHTS = {"float16": 8 * GiB, "bfloat16": 8 * GiB, "int8": 4 * GiB, "int4": 2 * GiB}


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class Server:
    def __init__(self):
        self.sim_dir = os.environ.get("GPUGUARD_SIM_DIR", "")
        self.state_path = os.environ.get("GPUGUARD_STATE", "")
        self.checkpoint = os.environ.get("GPUGUARD_CHECKPOINT", "")
        self.total = env_int("DEMO_GPU_MEMORY", 16 * GiB)
        self.steps = env_int("DEMO_STEPS", 120)
        self.burst_at = env_int("DEMO_BURST_AT", 70)
        self.burst = env_int("DEMO_BURST_MB", 9 * 1024) * MiB
        self.tick = env_int("DEMO_TICK_MS", 100) / 1000.0
        self.step = 0
        self.served = 0
        self.kv = 0
        self.reload = False
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

    def on_notify(self, signum, frame):
        self.reload = True  # handled in the loop, not in the signal handler

    def reload_state(self):
        self.reload = False
        try:
            with open(self.state_path) as f:
                st = json.load(f)
        except (OSError, ValueError) as e:
            self.log(f"could not read the state file: {e}")
            return
        env = dict(os.environ)
        env.update(st.get("env", {}))
        before = self.used()
        self.apply(env, st.get("profile", self.profile))
        self.log(f"live change to {self.profile} ({st.get('reason', '')}): "
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
        if not self.checkpoint or not os.path.exists(self.checkpoint):
            return
        with open(self.checkpoint) as f:
            ck = json.load(f)
        self.step, self.served = ck["step"], ck["served"]
        self.log(f"restored checkpoint: step {self.step}, {self.served} requests served")

    def save_checkpoint(self):
        if not self.checkpoint:
            return
        tmp = self.checkpoint + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"step": self.step, "served": self.served}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.checkpoint)

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
        signal.signal(signal.SIGUSR1, self.on_notify)
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
        self.load_checkpoint()
        self.log(f"serving: dtype={self.dtype} batch={self.batch} "
                 f"(restarts={os.environ.get('GPUGUARD_RESTARTS', '0')}, "
                 f"last exit={os.environ.get('GPUGUARD_LAST_EXIT', 'none')})")
        while self.step < self.steps:
            if self.reload:
                self.reload_state()
            self.step += 1
            self.served += self.batch
            # Load fills the KV cache: 8 MiB per sequence in the batch.
            self.kv = min(self.kv_cap, self.kv + self.batch * 8 * MiB)
            if self.step == self.burst_at:
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


if __name__ == "__main__":
    Server().run()
