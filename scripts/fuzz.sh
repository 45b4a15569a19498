#!/usr/bin/env bash
# Fuzz the two parsers of untrusted input, one after the other: the policy
# parser (policy FuzzParse) and the control socket's request decoder
# (control FuzzDecodeRequest).
#
#   scripts/fuzz.sh            # 30s each (a smoke run)
#   scripts/fuzz.sh 10m        # what docs/reliability.md reports
#
# FUZZ_PARALLEL sets the fuzzing workers per target (default 1, for shared
# machines). A crasher is written to <pkg>/testdata/fuzz/<Fuzz>/ by go
# test: fix the bug and commit that file, so that `go test` replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

dur=${1:-30s}
parallel=${FUZZ_PARALLEL:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
summary=()
for target in "./policy FuzzParse" "./control FuzzDecodeRequest"; do
  read -r pkg fn <<<"$target"
  echo "== $fn ($pkg) for $dur, -parallel $parallel"
  if ! go test "$pkg" -run '^$' -fuzz "^${fn}\$" -fuzztime "$dur" -parallel "$parallel" 2>&1 | tee "$log"; then
    status=1
  fi
  last=$(grep -Eo 'elapsed: [^,]+, execs: [0-9]+' "$log" | tail -1 || true)
  summary+=("$fn: ${last:-no progress line} ($(grep -qE '^(--- FAIL|FAIL)' "$log" && echo FAILED || echo ok))")
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$status"
