#!/usr/bin/env bash
# The performance check: gpuguard's end-to-end benchmarks (package bench:
# the real binary on the simulated GPU) and the package benchmarks (probe,
# control socket, metrics, journal, process tree), then a summary of the
# figures next to their targets (docs/performance.md). About 10 minutes.
# Benchmarks measure; nothing here fails on a figure. On a shared or busy
# machine the tails (p99, max) mostly measure the neighbours: see load1.
#
#   scripts/bench.sh [OUTDIR]        raw output in OUTDIR/bench.txt (default: a temp dir)
#   GPUGUARD_BENCH_BIN=/path/gpuguard scripts/bench.sh   measure that binary instead
#   GPUGUARD_BENCH_COMPARE=/path/gpuguard scripts/bench.sh   also idle that binary beside
#                                    the measured one, in the same window (A/B of a change)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
# shellcheck source=scripts/benchlib.sh
. scripts/benchlib.sh

open_raw bench.txt "${1:-}"

{
  run_facts
  echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(uname -r)"
  echo "go:      $(go version | cut -d' ' -f3)"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$raw"

run() { # title, go test args...
  local title=$1
  shift
  echo "== $title: go test $*" | tee -a "$raw"
  go test "$@" 2>&1 | tee -a "$raw" | grep -E '^(Benchmark|FAIL|ok|---)' || true
}

run "end-to-end (real binary)" ./bench -run '^$' -benchtime 1x -timeout 20m \
  -bench '^Benchmark(DetectionLatency|RampDetection|JumpFromCalm|Idle|RestartLatency|RestartBreakdown|Socket|StatusMany)$' \
  ${GPUGUARD_BENCH_COMPARE:+-idle.compare "$GPUGUARD_BENCH_COMPARE"}
run "deferred tasks (real binary, SQLite and a local redis-server)" ./bench -run '^$' -benchtime 1x -timeout 10m -bench '^BenchmarkTasks$'
run "shared GPU (real binary)" ./bench -run '^$' -benchtime 1x -timeout 20m -bench '^BenchmarkShared(Detection|Reserve)$'
run "micro (bench)" ./bench -run '^$' -benchtime 1s -timeout 10m -bench '^Benchmark(StateFileWrite|TickParts)$'
run "probe: 8 mocked H200s, 64 processes" ./nvml -run '^$' -bench '^BenchmarkProbeTick$' -benchmem
run "probe: DRM, 8 GPUs, 64 processes on a fake tree" ./internal/drm -run '^$' -bench '^BenchmarkDRMProbeTick$' -benchmem
run "control socket (in process)" ./control -run '^$' -bench '^Benchmark(StatusRoundTrip|PublishToSubscriber)$'
run "process tree" ./internal/proc -run '^$' -bench '^BenchmarkTree$' -benchmem
run "metrics scrape vs tick jitter" ./internal/metrics -run '^$' -bench '^BenchmarkTickJitter$' -benchtime 50x
run "journal, a million events" ./internal/journal -run '^$' -bench '^BenchmarkMillionEvents$' -benchtime 1000000x
run "front door (in process, against a direct connection in the same run)" ./internal/serve -run '^$' -benchtime 2000x -bench '^Benchmark(DoorLatency|DoorFirstByte)$'
run "front door throughput, 64 clients" ./internal/serve -run '^$' -benchtime 1x -bench '^BenchmarkDoorThroughput$'
run "front door (real binary)" ./bench -run '^$' -benchtime 1x -timeout 10m -bench '^BenchmarkDoor(Held|Restart)$'
run "gpuguard door (real binary; llama-swap beside it with GPUGUARD_BENCH_LLAMA_SWAP)" ./bench -run '^$' -benchtime 1x -timeout 10m -bench '^BenchmarkModelDoor'
run "gpuguard door, its own work per request" ./internal/door -run '^$' -benchtime 20000x -bench '^BenchmarkServeHTTP$'
run "journal, admissions summarised or one line each" ./internal/journal -run '^$' -bench '^BenchmarkAdmissions$' -benchtime 200000x

echo
header
B=BenchmarkDetectionLatency
row "1 detection (high -> SIGUSR1), 100ms: median" "$(metric $B median-ms)" ms 55
row "  max" "$(metric $B max-ms)" ms 110
row "  split: wait for tick+probe / notify (medians)" "$(metric $B decide-median-ms)" ms ""
row "  notify (state file + signal): median" "$(metric $B notify-median-ms)" ms ""
row "  of which signal delivery alone (median)" "$(metric $B signal-baseline-median-ms)" ms ""
B=BenchmarkRampDetection
row "1b ramp 0.1/s, high -> SIGUSR1, default policy: median" "$(metric $B median-ms)" ms 25
row "  max" "$(metric $B max-ms)" ms ""
B=BenchmarkJumpFromCalm
row "1c jump from calm -> SIGUSR1: max" "$(metric $B max-ms)" ms 1010
row "  median" "$(metric $B median-ms)" ms ""
B=BenchmarkIdle
row "2 idle CPU, default policy (calm: 1s period)" "$(metric $B cpu-%)" "%" 0.2
row "  per 200ms" "$(metric $B cpu-us/tick)" us ""
row "  wakeups (thread timeslices) per 200ms" "$(metric $B wakeups/tick)" "" ""
row "  bare Go 200ms ticker, same window" "$(metric $B floor-cpu-%)" "%" ""
row "  bare ticker wakeups per tick" "$(metric $B floor-wakeups/tick)" "" ""
row "  gpuguard / bare ticker" "$(metric $B x-floor)" x 0.5
row "  earlyoom (dry run), same window" "$(metric $B earlyoom-cpu-%)" "%" ""
row "  gpuguard / earlyoom" "$(metric $B x-earlyoom)" x 3
if [ -n "${GPUGUARD_BENCH_COMPARE:-}" ]; then
  row "  compared binary, same window" "$(metric $B compare-cpu-%)" "%" 0.2
  row "  compared binary, wakeups per tick" "$(metric $B compare-wakeups/tick)" "" ""
fi
row "  RSS" "$(metric $B rss-MiB)" MiB 20
row "  proc.Tree per tick, this host" "$(metric 'BenchmarkTickParts/tree/host' cpu-%@200ms)" "%" ""
row "  proc.Tree per tick, +400 processes" "$(metric 'BenchmarkTickParts/tree/host+400' cpu-%@200ms)" "%" ""
B=BenchmarkRestartLatency
row "3 restart (exit -> next start): median" "$(metric $B median-ms)" ms 10
row "  p99" "$(metric $B p99-ms)" ms ""
row "  of which exec + Go start of the child (median)" "$(metric $B exec-baseline-median-ms)" ms ""
row "  bare os/exec restart loop, same run (floor, median)" "$(metric $B floor-median-ms)" ms ""
row "  gpuguard / floor" "$(metric $B x-floor)" x 1.5
row "  start claim in the restart path (median)" "$(metric BenchmarkRestartBreakdown claim-median-us)" us ""
row "  state file write in the restart path (median)" "$(metric BenchmarkRestartBreakdown state-median-us)" us ""
row "4 probe tick, 8 H200 / 64 procs, cached" "$(metric BenchmarkProbeTick/cached ns/op)" us "" 0.001
row "  refreshed process list" "$(metric BenchmarkProbeTick/refresh ns/op)" us "" 0.001
row "4 DRM probe tick, 8 GPUs / 64 procs, cached" "$(metric BenchmarkDRMProbeTick/cached ns/op)" us 200 0.001
row "  rescanning every process (once a second)" "$(metric BenchmarkDRMProbeTick/refresh ns/op)" us "" 0.001
row "5 status round trip (control, in process): median" "$(metric BenchmarkStatusRoundTrip median-ns/op)" ms 1 0.000001
row "  publish -> subscriber (in process): median" "$(metric BenchmarkPublishToSubscriber median-ns/op)" ms 2 0.000001
row "  status round trip, real binary: median" "$(metric BenchmarkSocket status-median-us)" ms 1 0.001
row "  step decision -> subscriber, real binary: median" "$(metric BenchmarkSocket step-median-us)" ms 2 0.001
row "  gpuguard step CLI -> subscriber: median" "$(metric BenchmarkSocket step-cli-median-ms)" ms ""
row "6 gpuguard status --json, 32 instances: median" "$(metric BenchmarkStatusMany median-ms)" ms 100
row "7 tick lateness, idle: p99" "$(metric BenchmarkTickJitter idle-p99-µs)" us ""
row "  tick lateness, scraped 10/s: p99" "$(metric BenchmarkTickJitter scraped-p99-µs)" us ""
row "  journal on disk after 1e6 events" "$(metric BenchmarkMillionEvents MiB-on-disk)" MiB 80
row "  journal events dropped" "$(metric BenchmarkMillionEvents dropped)" "" ""
row "  granted admission, summarised: per event" "$(metric BenchmarkAdmissions/summarised ns/op)" us "" 0.001
row "  admission written as its own line: per event" "$(metric BenchmarkAdmissions/line-each ns/op)" us "" 0.001
row "  journal bytes per summarised admission" "$(metric BenchmarkAdmissions/summarised disk-B/event)" B ""
row "  journal bytes per admission on its own line" "$(metric BenchmarkAdmissions/line-each disk-B/event)" B ""
B=BenchmarkSharedDetection
row "8 shared GPU, crossing -> signal, 1 tenant: median" "$(metric $B/tenants-1 median-ms)" ms ""
row "  8 tenants: median" "$(metric $B/tenants-8 median-ms)" ms ""
row "  reserve round trip, 8 tenants: median" "$(metric BenchmarkSharedReserve/tenants-8 reserve-median-us)" ms 2 0.001
B=BenchmarkDoorLatency
row "9 front door, added latency (keep-alive, small): median" "$(metric $B added-median-µs)" us 100
row "  p99" "$(metric $B added-p99-µs)" us ""
row "  direct: median" "$(metric $B direct-median-µs)" us ""
row "  through the door: median" "$(metric $B door-median-µs)" us ""
row "  time to first byte of a stream, added: median" "$(metric BenchmarkDoorFirstByte added-ttfb-µs)" ms 1 0.001
row "  throughput, 64 clients, instant upstream: door/direct" "$(metric BenchmarkDoorThroughput/instant ratio)" x ""
row "  throughput, 64 clients, 20ms upstream: door/direct" "$(metric BenchmarkDoorThroughput/20ms ratio)" x ""
row "  RSS added per held request" "$(metric BenchmarkDoorHeld KiB/held)" KiB 16
row "  RSS with 1,000 held" "$(metric BenchmarkDoorHeld rss-MiB)" MiB 64
row "  planned restart, 200 req/s: failed through the door" "$(metric BenchmarkDoorRestart door-failed-%)" "%" 0
row "  the same, straight to the child" "$(metric BenchmarkDoorRestart direct-failed-%)" "%" ""
B=BenchmarkModelDoorLatency/upstream=frontdoor
row "10 gpuguard door, added latency vs the front door: median" "$(metric $B door-added-median-µs)" us 100
row "  llama-swap, the same" "$(metric $B swap-added-median-µs)" us ""
B=BenchmarkModelDoorThroughput/upstream=server/instant
row "  instant upstream, bare server: door/direct" "$(metric $B door-ratio)" x ""
row "  the same: door/llama-swap (goal >= 3)" "$(metric $B door-x-swap)" x ""
row "  50ms upstream, front door: door/direct (goal >= 0.95)" "$(metric BenchmarkModelDoorThroughput/upstream=frontdoor/50ms door-ratio)" x ""
row "  CPU per request, instant, bare server: door" "$(metric $B door-cpu-µs/req)" us ""
row "  the same, llama-swap" "$(metric $B swap-cpu-µs/req)" us ""
row "  idle CPU: door" "$(metric BenchmarkModelDoorIdle door-idle-cpu-%)" "%" ""
row "  idle RSS: door" "$(metric BenchmarkModelDoorIdle door-rss-MiB)" MiB ""
echo "load1 at the start of each end-to-end benchmark: $(grep -o '[0-9.]* load1' "$raw" | cut -d' ' -f1 | tr '\n' ' ')"
