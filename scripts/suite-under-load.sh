#!/usr/bin/env bash
# The whole test suite, over and over, with one CPU kept busy beside it: how
# flakes are found before CI finds them. Results are recorded in
# docs/reliability.md ("The suite under load").
#
#   scripts/suite-under-load.sh [RUNS]   RUNS runs of scripts/test.sh (20)
#
# It tests the committed HEAD in a fresh clone (nothing of this checkout's
# build caches or stray files), with `stress-ng --cpu 1 --cpu-load 70`
# beside it, and prints one line a run: PASS/FAIL, seconds, failed tests.
# Each run's full log stays in the printed directory. Needs stress-ng
# (`apt-get install stress-ng`).
set -uo pipefail
runs=${1:-20}
command -v stress-ng >/dev/null || { echo "suite-under-load: stress-ng is not installed (apt-get install stress-ng)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
git clone -q "$repo" "$work/tree" || exit 1
echo "testing $(git -C "$work/tree" log --oneline -1) in $work, $runs runs"
stress-ng --cpu 1 --cpu-load 70 --timeout 0 >/dev/null 2>&1 &
load=$!
trap 'kill $load 2>/dev/null' EXIT
passed=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if (cd "$work/tree" && scripts/test.sh) >"$work/run$i.log" 2>&1; then
    verdict=PASS passed=$((passed + 1))
  else
    verdict=FAIL
  fi
  echo "run $i $verdict $(($(date +%s) - start))s $(grep -E '^--- FAIL' "$work/run$i.log" | tr '\n' ' ')"
done
echo "$passed/$runs passed; logs in $work"
[ "$passed" -eq "$runs" ]
