#!/usr/bin/env bash
# gpu-smoke.sh: gpuguard against a real GPU, real NVML and a real CUDA
# allocator, in one call of a few minutes (at most 10). For a machine with an
# NVIDIA GPU, its driver, CUDA and PyTorch, but no Go toolchain: build the
# binaries on a machine with Go first and carry them over:
#
#   scripts/gpu-smoke.sh --build        # here: writes .carry/gpuguard and .carry/nvml.test
#   scripts/gpu-smoke.sh                # there: runs everything, prints a summary
#
# What it does, each step printing what it saw (and copying logs to $OUT):
#   1. the card, driver and torch; `gpuguard status --json --backend nvml`
#      next to nvidia-smi (names, UUIDs, totals, used);
#   2. NVML call latency (GetMemoryInfo, _v2, GetComputeRunningProcesses,
#      1,000 calls each) and gpuguard's probe tick, through the nvml test binary;
#   3. a PyTorch child whose cache grows 256 MiB a step under
#      scope = "process" with a 4 GiB quota and live profiles: gpuguard steps
#      it down and it survives; the same child without gpuguard, capped with
#      set_per_process_memory_fraction at the same 4 GiB, hits a real CUDA OOM;
#   4. a real CUDA OOM under set_per_process_memory_fraction, classified from
#      the real traceback, restarted one profile lower with the checkpoint
#      restored, and how long the driver took to free the memory;
#   5. detection latency with real NVML at interval 100 ms.
# It never changes the card's settings and uses plain allocations only.
set -uo pipefail
cd "$(dirname "$0")/.."
carry=.carry

if [ "${1:-}" = "--build" ]; then
  set -e
  export PATH="$PATH:/usr/local/go/bin"
  mkdir -p "$carry"
  CGO_ENABLED=1 go build -o "$carry/gpuguard" .
  CGO_ENABLED=1 go test -c -o "$carry/nvml.test" ./nvml
  ls -l "$carry"
  exit 0
fi

gg="$PWD/$carry/gpuguard"
out="${OUT:-$PWD/gpu-smoke-out}"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUGUARD_STATE_DIR="$work/state" GPUGUARD_RUNTIME_DIR="$work/run"
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
section() { echo; echo "=== $*"; }

[ -x "$gg" ] || { echo "no $gg: run scripts/gpu-smoke.sh --build on a machine with Go first" >&2; exit 1; }
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1)
# fraction of the card that is 4 GiB, for set_per_process_memory_fraction
frac4=$(python3 -c "print(f'{4096/$total_mib:.6f}')")

section "1. card, driver, torch; gpuguard status vs nvidia-smi"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv | tee "$out/nvidia-smi.csv" | tee -a "$summary"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' | tee -a "$summary"
"$gg" version | tee -a "$summary"
"$gg" status --json --backend nvml > "$out/status.json" 2>&1
say "gpuguard status --json --backend nvml: exit $?"
python3 - "$out/status.json" <<'EOF' | tee -a "$summary"
import json, sys
for g in json.load(open(sys.argv[1]))["gpus"]:
    print(f"  gpuguard: GPU {g['index']} {g['name']} {g['uuid']} used {g['used_bytes']/2**20:.0f} MiB of {g['total_bytes']/2**20:.0f} MiB")
EOF

section "2. NVML call latency"
timeout 120 "$carry/nvml.test" -test.run 'TestRealLibrary|TestRealCallLatency' -test.v > "$out/nvml-latency.txt" 2>&1
grep -E "LATENCY|GPU [0-9]|--- " "$out/nvml-latency.txt" | tee -a "$summary"

section "3. KV-cache growth under scope=process, quota 4 GiB, live profiles"
cat > "$work/kv.toml" <<'EOF'
name = "kv"
command = ["python3", "examples/gpu/kv_growth.py"]
[watch]
backend = "nvml"
interval = "100ms"
scope = "process"
quota = "4GiB"
[watermark]
sustain = "200ms"
grace = "2s"
[restart]
stop_timeout = "10s"
[[profile]]
name = "big"
live = true
env = { CACHE_CAP_MB = "100000" }
[[profile]]
name = "half"
live = true
env = { CACHE_CAP_MB = "1536" }
[[profile]]
name = "small"
live = true
env = { CACHE_CAP_MB = "768" }
EOF
STEPS=30 timeout 120 "$gg" run --policy "$work/kv.toml" > "$out/kv-gpuguard.log" 2>&1
rc=$?
say "under gpuguard: exit $rc; $(grep -c 'live change' "$out/kv-gpuguard.log") live changes; $(grep -q survived "$out/kv-gpuguard.log" && echo survived || echo 'did NOT survive')"
grep -E "stepdown|live change|survived" "$out/kv-gpuguard.log" | head -8 | tee -a "$summary"
FRACTION=$frac4 STEPS=30 timeout 120 python3 examples/gpu/kv_growth.py > "$out/kv-alone.log" 2>&1
rc=$?
say "without gpuguard (memory fraction = 4 GiB): exit $rc; $(grep -m1 -o 'OutOfMemoryError: CUDA out of memory[^.]*' "$out/kv-alone.log" || echo 'no OOM')"

section "4. a real CUDA OOM, restart one profile lower, checkpoint restored"
cat > "$work/oom.toml" <<EOF
name = "oomladder"
command = ["python3", "examples/gpu/oom_ladder.py"]
[watch]
backend = "nvml"
interval = "100ms"
[restart]
backoff = "10ms"
release_timeout = "30s"
[[profile]]
name = "6g"
env = { ALLOC_MB = "6144", FRACTION = "$frac4" }
[[profile]]
name = "1g"
env = { ALLOC_MB = "1024", FRACTION = "$frac4" }
EOF
timeout 180 "$gg" run --policy "$work/oom.toml" > "$out/oom.log" 2>&1
rc=$?
say "exit $rc"
grep -E "^profile|allocated|OutOfMemoryError|out of memory|started|not freed" "$out/oom.log" | tee -a "$summary"
cp "$GPUGUARD_STATE_DIR/oomladder/events.jsonl" "$out/oom-events.jsonl" 2>/dev/null
python3 - "$out/oom-events.jsonl" <<'EOF' | tee -a "$summary"
import json, sys
from datetime import datetime
evs = [json.loads(l) for l in open(sys.argv[1])]
def t(e): return datetime.fromisoformat(e["time"].replace("Z", "+00:00")[:26] + "+00:00")
ex = [e for e in evs if e["event"] == "exit"]
st = [e for e in evs if e["event"] == "start"]
rs = [e for e in evs if e["event"] == "restart"]
for r in rs:
    print(f"  restart reason={r.get('reason')} {r.get('from')} -> {r.get('to')}")
if ex and len(st) > 1:
    print(f"  exit -> next start (backoff 10ms + waiting for the driver to free the memory): {(t(st[1]) - t(ex[0])).total_seconds()*1000:.0f} ms")
EOF

section "5. detection latency with real NVML, interval 100 ms"
used_mib=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1)
quota_mib=$((used_mib + 8192))
cat > "$work/detect.toml" <<EOF
name = "detect"
command = ["python3", "examples/gpu/detect_latency.py"]
[watch]
backend = "nvml"
interval = "100ms"
quota = "${quota_mib}MiB"
[watermark]
sustain = "0s"
grace = "0s"
[[profile]]
name = "a"
live = true
[[profile]]
name = "b"
live = true
EOF
BLOCK_MB=7680 ROUNDS=20 timeout 120 "$gg" run --policy "$work/detect.toml" --devices 0 > "$out/detect.log" 2>&1
say "exit $?"
grep -E "DETECTION|no signal" "$out/detect.log" | tee -a "$summary"

echo
echo "=== summary ($summary)"
cat "$summary"
