#!/usr/bin/env bash
# gpu-smoke.sh: gpuguard against a real GPU, real NVML and a real CUDA
# allocator, in one call of about 3 to 5 minutes (never more than
# $SMOKE_BUDGET seconds, default 390). For a machine with an NVIDIA GPU, its
# driver and PyTorch (the plain `python3`), but no Go toolchain and no
# package registry: build the binaries on a machine with Go first and carry
# them over (.carry/ is git-ignored):
#
#   scripts/gpu-smoke.sh --build    # here: .carry/gpuguard and .carry/nvml.test
#   scripts/gpu-smoke.sh            # there: runs everything, prints a summary
#   SMOKE_SECTIONS="6 8" scripts/gpu-smoke.sh   # only some sections (a rerun)
#
# With the device tool: run(command="scripts/gpu-smoke.sh", carry=[".carry"],
# timeout_s=420); it sets $OUT, and everything lands there (summary.txt, logs,
# journals). Without $OUT: ./gpu-smoke-out. docs/gpu-validation.md says where
# the figures go.
#
# Steps, each printing what it saw into $OUT/summary.txt (verdicts as
# "CHECK ok|FAIL|info ...", listed again at the end). A failed step never
# stops the run, and each has its own timeout, cut to what is left of the
# budget; a section that no longer fits is skipped and says so.
#   0. loader and runtime facts: `ldconfig -p | grep nvidia-ml`, the
#      libnvidia-ml.so.1 files in the directories gpuguard searches (nvml_dirs
#      below, nvml/libpath.go's list), `gpuguard status --backend nvml` with
#      LD_LIBRARY_PATH unset (the built-in search) and with GPUGUARD_NVML_LIB
#      set to the library found (used for the rest of the run if only that
#      works), the exit-69 message for a missing GPUGUARD_NVML_LIB; uname,
#      /proc/1/cgroup, NSpid, /proc/version (gVisor, Firecracker); and what
#      scope = "process" sees: a PyTorch child holding 1 GiB
#      (examples/gpu/ramp.py), is its PID among the NVML processes gpuguard
#      lists, next to `nvidia-smi --query-compute-apps`;
#   1. the card, driver and torch; `gpuguard status --json --backend nvml`
#      next to nvidia-smi (names, UUIDs, totals, used);
#   2. NVML call latency (GetMemoryInfo, _v2, GetComputeRunningProcesses,
#      1,000 calls each) and gpuguard's probe tick:
#      `nvml.test -test.run 'TestRealLibrary|TestRealCallLatency' -test.v`;
#   3. a PyTorch child whose cache grows 256 MiB a step
#      (examples/gpu/kv_growth.py) under scope = "process" with a 4 GiB quota
#      and live profiles: gpuguard steps it down and it survives; the same
#      child without gpuguard, capped with set_per_process_memory_fraction at
#      the same 4 GiB, hits a real CUDA OOM;
#   4. a real CUDA OOM under set_per_process_memory_fraction
#      (examples/gpu/oom_ladder.py), classified from the real traceback,
#      restarted one profile lower with the checkpoint restored, and how long
#      the driver took to free the memory;
#   5. detection latency with real NVML at interval 100 ms
#      (examples/gpu/detect_latency.py);
#   6. two PyTorch tenants (kv_growth.py) sharing the GPU, priorities 10
#      ("lo") and 90 ("hi"), one runtime dir, scope = "device" with a quota of
#      used + 20 GiB; both send ready, wait for a go file, then grow together:
#      only lo steps down (stepdown in its journal, yield in hi's), no OOM, no
#      restart, both exit 0;
#   7. two tenants (ramp.py loading 4 GiB) launched at the same moment with
#      settle = 2s: the second child's start comes only after the first
#      settled; both start times and the first's settle moment (its
#      "start complete" line, stamped);
#   8. the adaptive period on a real ramp: ramp.py grows 64 MiB every 50 ms
#      under the default adaptive policy (sustain 0s) with a quota of used +
#      8 GiB, and drops to 1 GiB on SIGUSR1: crossing high -> signal latency
#      (from the child's own timestamps and cudaMemGetInfo), the period
#      through the ramp (status polled every 50 ms), and the period at calm
#      (`gpuguard status --json` interval_seconds after 7 s flat);
#   9. Xid and MIG facts, provoking nothing:
#      `nvml.test -test.run 'TestRealEvents|TestRealMIG' -test.v`: the event
#      types GPU 0 supports, gpuguard's registration, one 1 s wait, the MIG
#      mode (current, pending) and the devices gpuguard resolves.
# It never changes the card's settings, never resets it, and uses plain
# allocations only (no managed memory). scripts/gpu_smoke.py turns the logs
# into the figures.
set -uo pipefail
cd "$(dirname "$0")/.."
carry=.carry

if [ "${1:-}" = "--build" ]; then
  set -e
  export PATH="$PATH:/usr/local/go/bin"
  mkdir -p "$carry"
  CGO_ENABLED=1 go build -o "$carry/gpuguard" .
  CGO_ENABLED=1 go test -c -o "$carry/nvml.test" ./nvml
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git describe --always --dirty 2>/dev/null || echo '?')" > "$carry/BUILD"
  ls -l "$carry"
  echo "needs glibc >= $(objdump -T "$carry/gpuguard" "$carry/nvml.test" 2>/dev/null |
    grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1) on the GPU machine"
  exit 0
fi

gg="$PWD/$carry/gpuguard"
out="${OUT:-$PWD/gpu-smoke-out}"
mkdir -p "$out"
work=$(mktemp -d)
export GPUGUARD_STATE_DIR="$work/state" GPUGUARD_RUNTIME_DIR="$work/run"
summary="$out/summary.txt"
: > "$summary"
budget=${SMOKE_BUDGET:-390}
GiB=$((1 << 30))

# The directories gpuguard searches for libnvidia-ml.so.1 after the dynamic
# loader, on amd64 (nvml/libpath.go; nvml's TestSmokeScriptReferences keeps
# the two lists equal).
nvml_dirs=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib64 /usr/lib/x86_64-linux-gnu
  /usr/lib/x86_64-linux-gnu/nvidia/current /lib64 /lib/x86_64-linux-gnu /usr/lib
  /run/nvidia/driver/usr/lib64 /run/nvidia/driver/usr/lib/x86_64-linux-gnu
  /run/nvidia/driver/usr/lib/x86_64-linux-gnu/nvidia/current /run/nvidia/driver/lib64
  /run/nvidia/driver/lib/x86_64-linux-gnu /run/nvidia/driver/usr/lib /usr/lib/wsl/lib)

say() { echo "$*" | tee -a "$summary"; }
section() { echo; echo "=== $*" | tee -a "$summary"; }
# ck STATUS TEXT: a verdict, ok when STATUS is 0.
ck() { if [ "$1" -eq 0 ] 2>/dev/null; then say "CHECK ok $2"; else say "CHECK FAIL $2"; fi; }
# lim N: a step's timeout: N seconds, or what is left of the budget (less
# 15 s for the summary), whichever is less.
lim() {
  local left=$((budget - SECONDS - 15))
  if [ "$left" -lt "$1" ]; then echo $((left > 1 ? left : 1)); else echo "$1"; fi
}
# fits N: at least N seconds of the budget are left.
fits() { [ $((budget - SECONDS - 15)) -ge "$1" ]; }
# stamp: each line of stdin, prefixed with the wall clock (epoch seconds).
stamp() { local l; while IFS= read -r l || [ -n "$l" ]; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
# run_gg LOG SECONDS ARGS...: `gpuguard run ARGS` for at most SECONDS: the
# child's stdout in $out/LOG.log, gpuguard's stderr (with the child's)
# stamped in $out/LOG.err, the exit status in $out/LOG.rc.
run_gg() {
  local log=$out/$1 t=$2
  shift 2
  { timeout -k 5 "$t" "$gg" run "$@" 2>&1 >&3 3>&- | stamp > "$log.err"; echo "${PIPESTATUS[0]}" > "$log.rc"; } 3> "$log.log"
}
rc_of() { cat "$out/$1.rc" 2>/dev/null || echo "?"; }
# wait_line FILE TEXT SECONDS [PID]: true once FILE has a line with TEXT;
# false after SECONDS, or once PID has ended without it.
wait_line() {
  local end=$((SECONDS + $3))
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    if [ "$SECONDS" -ge "$end" ] || { [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; }; then
      grep -qF -- "$2" "$1" 2>/dev/null
      return
    fi
    sleep 0.2
  done
}
# keep NAME: the instance's journal, to $out/NAME-events.jsonl.
keep() { cp "$GPUGUARD_STATE_DIR/$1/events.jsonl" "$out/$1-events.jsonl" 2>/dev/null; }
# gg_mem: g_used and g_total, GPU 0's bytes as gpuguard reads them.
gg_mem() {
  "$gg" status --json --backend nvml --devices 0 > "$work/mem.json" 2>&1
  read -r g_used g_total < <(python3 scripts/gpu_smoke.py gpu0 "$work/mem.json")
  [ "${g_total:-0}" -gt 0 ] 2>/dev/null || { say "cannot read GPU 0's memory: $(head -c 500 "$work/mem.json")"; return 1; }
}
# stop_ours: SIGTERM to every gpuguard instance of this run (our private
# runtime dir), each by its pid; they stop their children.
stop_ours() {
  local p
  for p in $("$gg" status --json 2>/dev/null | python3 -c 'import json,sys
print(" ".join(str(i["pid"]) for i in json.load(sys.stdin).get("instances", []) if i.get("pid")))' 2>/dev/null); do
    kill -TERM "$p" 2>/dev/null
  done
}
# try_nvml NAME ENV...: the exit status of `gpuguard run --backend nvml --
# true` under `env ENV...` (69: NVML could not be loaded); its stderr in
# $out/NAME.err.
try_nvml() {
  local f=$1
  shift
  env "$@" timeout "$(lim 30)" "$gg" run --policy "$work/empty.toml" --backend nvml --name "loader-$f" -- true \
    > /dev/null 2> "$out/$f.err"
  echo $?
}
# ck_test STATUS FILE TEST...: a verdict on a test binary's -test.v output
# in $out/FILE and its exit STATUS: ok only when every TEST ran and passed.
ck_test() {
  local rc=$1 f=$2 t
  shift 2
  for t in "$@"; do grep -q -- "^--- PASS: $t " "$out/$f" || rc=1; done
  ck "$rc" "nvml.test $* ran and passed (see $f)"
}
cleanup() { stop_ours; wait; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM INT

[ -x "$gg" ] || { echo "no $gg: run scripts/gpu-smoke.sh --build on a machine with Go first" >&2; exit 1; }
section0() {
  section "0. loader, runtime, what scope = \"process\" sees"
  say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); binaries $(cat "$carry/BUILD" 2>/dev/null || echo 'of unknown build')"
  say "uname: $(uname -a)"
  say "/proc/version: $(cat /proc/version 2>&1)"
  say "/proc/1/cgroup: $(head -3 /proc/1/cgroup 2>&1 | tr '\n' ' ')"
  local nspid
  nspid=$(awk '/^NSpid:/ {print NF - 1}' /proc/$$/status)
  say "this shell: $(grep -E '^NSpid' /proc/$$/status | tr '\t' ' ') ($nspid pid(s): $([ "${nspid:-1}" -gt 1 ] &&
    echo 'a nested PID namespace, visible from here' || echo 'no nested PID namespace visible from here')); pid ns $(readlink /proc/$$/ns/pid); pid 1 is $(cat /proc/1/comm 2>&1)"
  say "dmi: $(cat /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name 2>/dev/null | tr '\n' ' ')"
  say "glibc: $(ldd --version 2>&1 | head -1)"
  say "LD_LIBRARY_PATH=${LD_LIBRARY_PATH-<unset>} GPUGUARD_NVML_LIB=${GPUGUARD_NVML_LIB-<unset>}"
  local ldc lib="" d f rc rc2
  ldc=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | grep nvidia-ml)
  say "ldconfig -p | grep nvidia-ml: ${ldc:-nothing, not in the loader cache}"
  { ls -la /usr/local/nvidia /usr/local/nvidia/lib64; grep nvidia /proc/mounts; } > "$out/usr-local-nvidia.txt" 2>&1
  say "/usr/local/nvidia mounts: $(grep -c nvidia /proc/mounts) ($(grep nvidia /proc/mounts | awk '{print $2" "$4}' | head -3 | tr '\n' ';'))"
  for d in "${nvml_dirs[@]}"; do
    for f in "$d"/libnvidia-ml.so*; do
      [ -e "$f" ] || continue
      say "  searched dir has: $f -> $(readlink -f "$f")"
      [ -z "$lib" ] && [ "${f##*/}" = libnvidia-ml.so.1 ] && lib=$f
    done
  done
  timeout "$(lim 30)" find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -name 'libnvidia-ml.so*' -print \
    2>/dev/null | head -20 > "$out/libnvidia-ml-found.txt"
  say "libnvidia-ml.so* anywhere: $(tr '\n' ' ' < "$out/libnvidia-ml-found.txt")"
  [ -z "$lib" ] && lib=$(echo "$ldc" | awk '/=>/ {print $NF; exit}')
  [ -z "$lib" ] && lib=$(grep -m1 'libnvidia-ml.so.1$' "$out/libnvidia-ml-found.txt")

  : > "$work/empty.toml"
  "$gg" status --json --backend nvml > "$out/status-first.json" 2>&1
  say "gpuguard status --backend nvml as the environment is: $(grep -m1 -o 'warning.*' "$out/status-first.json" | head -c 300 || echo ok)"
  rc=$(try_nvml builtin -u LD_LIBRARY_PATH -u GPUGUARD_NVML_LIB)
  say "gpuguard run --backend nvml -- true, LD_LIBRARY_PATH and GPUGUARD_NVML_LIB unset (the built-in search): exit $rc"
  [ "$rc" != 0 ] && say "  $(head -c 1500 "$out/builtin.err")"
  ck "$rc" "loader: gpuguard finds libnvidia-ml.so.1 by itself"
  if [ -n "$lib" ]; then
    rc2=$(try_nvml envlib -u LD_LIBRARY_PATH GPUGUARD_NVML_LIB="$lib")
    [ "$rc2" != 0 ] && say "  $(head -c 1500 "$out/envlib.err")"
    ck "$rc2" "loader: GPUGUARD_NVML_LIB=$lib works (exit $rc2)"
    if [ "$rc" != 0 ] && [ "$rc2" = 0 ]; then
      export GPUGUARD_NVML_LIB=$lib
      say "the rest of the run uses GPUGUARD_NVML_LIB=$lib: a finding, the built-in search should have found it"
    fi
  else
    say "CHECK FAIL loader: no libnvidia-ml.so.1 found anywhere"
  fi
  rc=$(try_nvml missing GPUGUARD_NVML_LIB=/nonexistent/libnvidia-ml.so.1)
  say "GPUGUARD_NVML_LIB=/nonexistent/...: exit $rc: $(head -c 300 "$out/missing.err")"
  [ "$rc" = 69 ] && grep -q /nonexistent/libnvidia-ml.so.1 "$out/missing.err"
  ck $? "loader: a missing GPUGUARD_NVML_LIB is exit 69 naming it"

  fits 40 || { say "CHECK FAIL scope=process: skipped, budget spent"; return; }
  cat > "$work/scope.toml" <<'EOF'
name = "scope"
command = ["python3", "examples/gpu/ramp.py"]
[watch]
backend = "nvml"
interval = "100ms"
scope = "process"
quota = "4GiB"
[[profile]]
name = "only"
EOF
  BLOCK_MB=1024 TOTAL_MB=1024 HOLD_S=4 run_gg scope "$(lim 60)" --policy "$work/scope.toml" --devices 0 &
  local job=$!
  if wait_line "$out/scope.log" '"ev": "flat"' "$(lim 45)" "$job"; then
    sleep 1.5 # the process list is refreshed once a second
    "$gg" status --json > "$out/scope-status.json" 2>&1
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader > "$out/scope-smi-apps.txt" 2>&1
    python3 scripts/gpu_smoke.py scope "$out/scope-status.json" scope "$out/scope-smi-apps.txt" | tee -a "$summary"
  else
    say "CHECK FAIL scope=process: the child never held its memory (see scope.log, scope.err)"
  fi
  wait "$job"
  say "scope=process run: exit $(rc_of scope)"
  keep scope
}

section1() {
  section "1. card, driver, torch; gpuguard status vs nvidia-smi"
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv 2>&1 |
    tee "$out/nvidia-smi.csv" | tee -a "$summary"
  timeout "$(lim 120)" python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1 |
    tail -3 | tee -a "$summary"
  "$gg" version | tee -a "$summary"
  "$gg" status --json --backend nvml > "$out/status.json" 2>&1
  say "gpuguard status --json --backend nvml: exit $?"
  python3 scripts/gpu_smoke.py gpus "$out/status.json" | tee -a "$summary"
}

section2() {
  section "2. NVML call latency"
  timeout "$(lim 90)" "$carry/nvml.test" -test.run 'TestRealLibrary|TestRealCallLatency' -test.v > "$out/nvml-latency.txt" 2>&1
  ck_test $? nvml-latency.txt TestRealLibrary TestRealCallLatency
  grep -E "LATENCY|GPU [0-9]|no NVML|--- " "$out/nvml-latency.txt" | cut -c1-400 | tee -a "$summary"
}

# kv_policy NAME PRIORITY SCOPE QUOTA BIG MID SMALL: $work/NAME.toml, a
# kv_growth.py child with live profiles capping its cache at BIG, MID and
# SMALL MiB (sections 3 and 6).
kv_policy() {
  cat > "$work/$1.toml" <<EOF
name = "$1"
priority = $2
command = ["python3", "examples/gpu/kv_growth.py"]
[watch]
backend = "nvml"
interval = "100ms"
scope = "$3"
quota = "$4"
[watermark]
sustain = "200ms"
grace = "2s"
[restart]
stop_timeout = "10s"
[[profile]]
name = "big"
live = true
env = { CACHE_CAP_MB = "$5" }
[[profile]]
name = "mid"
live = true
env = { CACHE_CAP_MB = "$6" }
[[profile]]
name = "small"
live = true
env = { CACHE_CAP_MB = "$7" }
EOF
}

section3() {
  section "3. KV-cache growth under scope=process, quota 4 GiB, live profiles"
  kv_policy kv 0 process 4GiB 100000 1536 768
  STEPS=30 timeout "$(lim 60)" "$gg" run --policy "$work/kv.toml" > "$out/kv-gpuguard.log" 2>&1
  local rc=$?
  say "under gpuguard: exit $rc; $(grep -c 'live change' "$out/kv-gpuguard.log") live changes; $(grep -q survived "$out/kv-gpuguard.log" && echo survived || echo 'did NOT survive')"
  grep -E "stepdown|live change|survived" "$out/kv-gpuguard.log" | head -8 | tee -a "$summary"
  grep -q survived "$out/kv-gpuguard.log" && grep -q 'live change' "$out/kv-gpuguard.log"
  ck $? "kv growth under gpuguard: stepped down live and survived"
  keep kv
  FRACTION=$frac4 STEPS=30 timeout "$(lim 60)" python3 examples/gpu/kv_growth.py > "$out/kv-alone.log" 2>&1
  rc=$?
  say "without gpuguard (memory fraction = 4 GiB): exit $rc; $(grep -m1 -o 'OutOfMemoryError: CUDA out of memory[^.]*' "$out/kv-alone.log" || echo 'no OOM')"
}

section4() {
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
  timeout "$(lim 120)" "$gg" run --policy "$work/oom.toml" > "$out/oom.log" 2>&1
  local rc=$?
  say "exit $rc"
  ck "$rc" "OOM ladder: the restarted child succeeded one profile lower"
  grep -E "^profile|allocated|OutOfMemoryError|out of memory|started|not freed" "$out/oom.log" | tee -a "$summary"
  keep oomladder
  python3 scripts/gpu_smoke.py oom "$out/oomladder-events.jsonl" 2>&1 | tail -5 | tee -a "$summary"
}

# signal_policy NAME EXAMPLE QUOTA WATCH: $work/NAME.toml, the child EXAMPLE
# measuring detection: two live profiles, no sustain, no grace, the quota,
# and the extra [watch] line WATCH (sections 5 and 8).
signal_policy() {
  cat > "$work/$1.toml" <<EOF
name = "$1"
command = ["python3", "$2"]
[watch]
backend = "nvml"
quota = "$3"
$4
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
}

section5() {
  section "5. detection latency with real NVML, interval 100 ms"
  local used_mib quota_mib
  used_mib=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1)
  quota_mib=$((used_mib + 8192))
  signal_policy detect examples/gpu/detect_latency.py "${quota_mib}MiB" 'interval = "100ms"'
  BLOCK_MB=7680 ROUNDS=20 timeout "$(lim 90)" "$gg" run --policy "$work/detect.toml" --devices 0 > "$out/detect.log" 2>&1
  say "exit $?"
  grep -E "DETECTION|no signal" "$out/detect.log" | tee -a "$summary"
  grep -q DETECTION "$out/detect.log"
  ck $? "detection latency at 100 ms measured"
}

section6() {
  section "6. two PyTorch tenants sharing the GPU, priorities 10 and 90, both growing"
  gg_mem || { say "CHECK FAIL sharing: skipped"; return; }
  local quota=$((g_used + 20 * GiB)) a b
  say "GPU 0 used $((g_used >> 20)) MiB before; quota $((quota >> 20)) MiB, high at $((quota * 9 / 10 >> 20)) MiB;" \
    "lo (priority 10) grows 1 GiB/s uncapped, hi (priority 90) 1 GiB/s up to 6 GiB; live caps 4 GiB, 2 GiB (lo)"
  kv_policy lo 10 device "$quota" 100000 4096 2048
  kv_policy hi 90 device "$quota" 6144 3072 1536
  rm -f "$work/go"
  export READY=1 GO_FILE="$work/go" STEPS=60 STEP_MB=256 STEP_SECONDS=0.25
  run_gg lo "$(lim 150)" --policy "$work/lo.toml" --devices 0 &
  a=$!
  run_gg hi "$(lim 150)" --policy "$work/hi.toml" --devices 0 &
  b=$!
  unset READY GO_FILE STEPS STEP_MB STEP_SECONDS
  if wait_line "$out/lo.log" "waiting for go" "$(lim 90)" "$a" && wait_line "$out/hi.log" "waiting for go" "$(lim 90)" "$b"; then
    touch "$work/go"
    say "both children ready; go at $(date -u +%H:%M:%S.%N)"
  else
    say "CHECK FAIL sharing: the two children did not both get ready (lo.log, hi.log, lo.err, hi.err)"
    stop_ours
  fi
  wait "$a" "$b"
  say "lo: exit $(rc_of lo), $(grep -c 'live change' "$out/lo.log") live changes, $(grep -q survived "$out/lo.log" && echo survived || echo 'did NOT survive');" \
    "hi: exit $(rc_of hi), $(grep -c 'live change' "$out/hi.log") live changes, $(grep -q survived "$out/hi.log" && echo survived || echo 'did NOT survive')"
  [ "$(rc_of lo)" = 0 ] && [ "$(rc_of hi)" = 0 ]
  ck $? "sharing: both tenants exit 0"
  grep -h "live change" "$out/lo.log" "$out/hi.log" | head -4 | tee -a "$summary"
  keep lo
  keep hi
  python3 scripts/gpu_smoke.py share "$out/lo-events.jsonl" "$out/hi-events.jsonl" | tee -a "$summary"
}

section7() {
  section "7. two tenants launched at the same moment, settle = 2s"
  local n a b
  for n in s7a s7b; do
    cat > "$work/$n.toml" <<EOF
name = "$n"
command = ["python3", "examples/gpu/ramp.py"]
[watch]
backend = "nvml"
interval = "100ms"
settle = "2s"
[[profile]]
name = "only"
EOF
  done
  export BLOCK_MB=512 PERIOD_MS=100 TOTAL_MB=4096 HOLD_S=3
  run_gg s7a "$(lim 90)" --policy "$work/s7a.toml" --devices 0 &
  a=$!
  run_gg s7b "$(lim 90)" --policy "$work/s7b.toml" --devices 0 &
  b=$!
  unset BLOCK_MB PERIOD_MS TOTAL_MB HOLD_S
  wait "$a" "$b"
  say "s7a: exit $(rc_of s7a); s7b: exit $(rc_of s7b)"
  [ "$(rc_of s7a)" = 0 ] && [ "$(rc_of s7b)" = 0 ]
  ck $? "start order: both tenants exit 0"
  grep -h -E "waiting for|start complete" "$out/s7a.err" "$out/s7b.err" | tee -a "$summary"
  keep s7a
  keep s7b
  python3 scripts/gpu_smoke.py order "$out/s7a-events.jsonl" "$out/s7a.err" "$out/s7a.log" \
    "$out/s7b-events.jsonl" "$out/s7b.err" "$out/s7b.log" 2 | tee -a "$summary"
}

section8() {
  section "8. the adaptive period on a real ramp (default adaptive policy, sustain 0s)"
  gg_mem || { say "CHECK FAIL ramp: skipped"; return; }
  local quota=$((g_used + 8 * GiB)) job
  say "GPU 0 used $((g_used >> 20)) MiB of $((g_total >> 20)) MiB before; quota $((quota >> 20)) MiB; the child grows 64 MiB every 50 ms"
  signal_policy ramp examples/gpu/ramp.py "$quota" 'scope = "device"'
  BLOCK_MB=64 PERIOD_MS=50 TOTAL_MB=7680 SHRINK_MB=1024 HOLD_S=9 run_gg ramp "$(lim 90)" --policy "$work/ramp.toml" --devices 0 &
  job=$!
  if wait_line "$out/ramp.err" "started" "$(lim 30)" "$job"; then
    python3 scripts/gpu_smoke.py trace "$GPUGUARD_RUNTIME_DIR/ramp.sock" "$out/ramp-trace.jsonl" "$(lim 60)" &
  fi
  if wait_line "$out/ramp.log" '"ev": "flat"' "$(lim 60)" "$job"; then
    sleep 7 # the measurement: the period once the memory has been flat for more than 6 s
    "$gg" status --json > "$out/ramp-calm.json" 2>&1
  fi
  wait
  say "exit $(rc_of ramp)"
  keep ramp
  python3 scripts/gpu_smoke.py ramp "$out/ramp.log" "$out/ramp-events.jsonl" "$g_total" "$quota" 0.9 \
    "$out/ramp-trace.jsonl" "$out/ramp-calm.json" | tee -a "$summary"
}

section9() {
  section "9. Xid event set and MIG mode (nothing provoked, nothing changed)"
  timeout "$(lim 60)" "$carry/nvml.test" -test.run 'TestRealEvents|TestRealMIG' -test.v > "$out/nvml-events.txt" 2>&1
  ck_test $? nvml-events.txt TestRealEvents TestRealMIG
  grep -E "EVENTS|MIG|no NVML|--- " "$out/nvml-events.txt" | grep -v '^=== RUN' | cut -c1-400 | tee -a "$summary"
}

total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
# fraction of the card that is 4 GiB, for set_per_process_memory_fraction
frac4=$(python3 -c "print(f'{4096/${total_mib:-0}:.6f}')" 2>/dev/null || echo 0.03)

# section N SECONDS: the least time each section needs to be worth starting.
sections=${SMOKE_SECTIONS:-0 1 2 3 4 5 6 7 8 9}
for s in "0 40" "1 20" "2 20" "3 40" "4 30" "5 30" "6 50" "7 40" "8 40" "9 15"; do
  read -r n need <<< "$s"
  case " $sections " in *" $n "*) ;; *) continue ;; esac
  if fits "$need"; then
    t0=$SECONDS
    "section$n"
    say "(section $n took $((SECONDS - t0)) s)"
  else
    section "$n. skipped"
    say "CHECK FAIL section $n skipped: $((budget - SECONDS)) s of the $budget s budget left"
  fi
done

section "summary ($summary), $SECONDS s in all"
grep '^CHECK' "$summary" | tee "$out/checks.txt"
