#!/usr/bin/env bash
# Long reliability runs; the figures they print are recorded in
# docs/reliability.md. The default `go test ./...` runs short versions of
# the same tests.
#
#   scripts/soak.sh            everything below
#   GPUGUARD_SOAK_KILL9=N      kill -9 rounds per cleanup mode (200)
#   GPUGUARD_SOAK_CRASHLOOP=N  child exits in the crash loop (10000)
#   SOAK_REPEAT=N              repetitions of the signal/escape/output tests (20)
#   GPUGUARD_SOAK_GPUDIR_SECONDS=N  fault injection in a shared GPU's dir (600)
set -uo pipefail
cd "$(dirname "$0")/.."
status=0 # every section runs; the script fails if any did
export PATH="$PATH:/usr/local/go/bin"
export GPUGUARD_SOAK=1
repeat=${SOAK_REPEAT:-20}
exits=${GPUGUARD_SOAK_CRASHLOOP:-10000}

# Keep the verdicts and what the tests log (their figures), drop the noise.
figures() { grep -E '^(=== RUN|--- |ok|FAIL|PASS|panic)|(reliability|harden)_.*_test\.go:[0-9]+: ' || true; }

echo "== process faults: kill -9 and crash loop (e2e, race-detector build)"
go test -count=1 -timeout 60m -v -run '^(TestKill9|TestCrashLoop)$' ./e2e 2>&1 | figures || status=1

echo "== process faults: signals, escapes, held output, orphans x$repeat"
go test -count="$repeat" -timeout 60m -run '^(TestStopSignalForwardedOnce|TestSecondInterruptKills|TestChildIgnoringTermIsKilled|TestChildExitingZeroOnTerm|TestStopDuringBackoff|TestGrandchildHoldingOutput|TestEscapedDaemonAtStop|TestOrphansReaped|TestOrphansReapedAsPID1)$' ./e2e 2>&1 | figures || status=1

echo "== the runtime dir under attack: fault injection in a shared GPU's dir, ${GPUGUARD_SOAK_GPUDIR_SECONDS:-600} s (plain build); 10,001 leases"
go test -count=1 -timeout 60m -v -run '^(TestGPUDirFaultInjection|TestSocketBoundsOfTheRealServer)$' ./e2e 2>&1 | figures || status=1

echo "== proc: cgroup and reaper unit tests x$repeat (race)"
go test -race -count="$repeat" -timeout 30m -run 'Cgroup|Reaper|Pdeathsig|Group|Drain' ./internal/proc 2>&1 | figures || status=1

echo "== crash-loop throughput of a plain (non-race) build: $exits exits"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gpuguard" . || exit 1
cat > "$work/policy.toml" <<'EOF'
[watch]
backend = "sim"
interval = "200ms"
[restart]
backoff = "1ms"
backoff_max = "1ms"
max_restarts = 1000000
window = "1s"
EOF
crashloop() { # name, exits, extra env...; prints the throughput
  local name=$1 n=$2
  shift 2
  local start end
  start=$(date +%s.%N)
  env "$@" "$work/gpuguard" run --policy "$work/policy.toml" --name "$name" \
    --state-dir "$work/$name" --runtime-dir "$work/run" -- \
    /bin/sh -c "[ \"\$GPUGUARD_RESTARTS\" -ge $((n - 1)) ] && exit 0; exit 1" 2>/dev/null || status=1
  end=$(date +%s.%N)
  local got
  got=$(grep -c '"event":"exit"' "$work/$name/events.jsonl")
  awk -v n="$n" -v got="$got" -v s="$start" -v e="$end" -v name="$name" \
    'BEGIN { printf "%s: %d exits journaled of %d, %.1f s, %.0f restarts/s\n", name, got, n, e - s, n / (e - s) }'
}
crashloop cgroup "$exits"
crashloop pgroup "$exits" GPUGUARD_CGROUP=off

echo "== restart cost with a checkpoint to rotate (keep = 3): 200 exits each"
for size in 1M 64M; do
  name=ckpt$size
  mkdir -p "$work/$name"
  head -c "$size" /dev/zero > "$work/$name/checkpoint"
  crashloop "$name" 200
done
exit $status
