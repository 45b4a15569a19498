#!/usr/bin/env bash
# The house benchmarks (issue 20): the three figures a restructuring of the
# supervisor must hold, measured in one run of the real binary on the
# simulated GPU, in about two minutes:
#   - crossing -> signal: BenchmarkDetectionLatency (100 ms interval)
#   - idle CPU: BenchmarkIdle, against a bare Go 200 ms ticker in the same window
#   - the restart gap: BenchmarkRestartLatency, against a bare os/exec
#     restart loop run right after it (the fork/exec floor)
# One line per figure, the load with it. Compare ratios (x-floor) between
# runs on a shared machine, not raw times. Benchmarks measure; nothing here
# fails on a figure. docs/performance.md ("The house benchmarks") has the
# figures before and after.
#
#   scripts/bench-house.sh [OUTDIR]     raw output in OUTDIR/house.txt (default: a temp dir)
#   GPUGUARD_BENCH_BIN=/abs/gpuguard scripts/bench-house.sh   measure that binary instead
#   TMPDIR=/dev/shm scripts/bench-house.sh   the state and runtime dirs on tmpfs
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
# shellcheck source=scripts/benchlib.sh
. scripts/benchlib.sh

open_raw house.txt "${1:-}"
{
  run_facts
  echo "binary:  ${GPUGUARD_BENCH_BIN:-built from this tree}"
  echo "tmpdir:  ${TMPDIR:-/tmp} ($(stat -f -c %T "${TMPDIR:-/tmp}"))"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (start)"
} | tee -a "$raw"

go test ./bench -run '^$' -benchtime 1x -timeout 10m \
  -bench '^Benchmark(DetectionLatency|Idle|RestartLatency)$' \
  -detect.samples "${HOUSE_DETECT_SAMPLES:-150}" -idle.for "${HOUSE_IDLE_FOR:-30s}" -idle.earlyoom=false \
  -restart.n "${HOUSE_RESTARTS:-200}" 2>&1 | tee -a "$raw" | grep -E '^(FAIL|---)' || true
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (end)" | tee -a "$raw"

echo
header
B=BenchmarkDetectionLatency
row "crossing -> signal, 100ms interval: median" "$(metric $B median-ms)" ms 55
row "crossing -> signal: max" "$(metric $B max-ms)" ms 110
row "crossing -> signal: decision -> signal (median)" "$(metric $B notify-median-ms)" ms ""
row "crossing -> signal: load1" "$(metric $B load1)" "" ""
B=BenchmarkIdle
row "idle CPU (calm, 1s period)" "$(metric $B cpu-%)" "%" 0.2
row "idle: bare Go 200ms ticker, same window" "$(metric $B floor-cpu-%)" "%" ""
row "idle: gpuguard / bare ticker" "$(metric $B x-floor)" x 0.5
row "idle: wakeups per 200ms" "$(metric $B wakeups/tick)" "" ""
row "idle: RSS" "$(metric $B rss-MiB)" MiB 20
row "idle: RSS, anonymous (heap, stacks, runtime)" "$(metric $B rss-anon-MiB)" MiB ""
row "idle: RSS, the binary's file pages" "$(metric $B rss-file-MiB)" MiB ""
row "idle: RSS, of the file pages mapped by 2 MiB" "$(metric $B rss-file-pmd-MiB)" MiB ""
row "idle: load1" "$(metric $B load1)" "" ""
B=BenchmarkRestartLatency
row "restart gap (exit -> next start): median" "$(metric $B median-ms)" ms 10
row "restart gap: p99" "$(metric $B p99-ms)" ms ""
row "restart gap: bare os/exec loop, same run (floor)" "$(metric $B floor-median-ms)" ms ""
row "restart gap / floor" "$(metric $B x-floor)" x 1.5
row "restart gap: load1" "$(metric $B load1)" "" ""
