# Shared by scripts/bench.sh and scripts/bench-house.sh (sourced, not run):
# reading figures out of `go test -bench` output in $raw and printing them
# next to their targets.

# open_raw FILE [OUTDIR]: sets raw to OUTDIR/FILE (OUTDIR: a temp dir by
# default), emptied.
open_raw() {
  local out=${2:-$(mktemp -d)}
  mkdir -p "$out"
  raw="$out/$1"
  : >"$raw"
}

# run_facts: the date and the commit measured, one line each.
run_facts() {
  echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree differs)')"
}

# metric BENCH UNIT: the value of UNIT on the first line of BENCH (the name
# without the -GOMAXPROCS suffix).
metric() {
  awk -v b="$1" -v u="$2" '
    { name = $1; sub(/-[0-9]+$/, "", name) }
    name == b { for (i = 3; i < NF; i++) if ($(i + 1) == u) { print $i; exit } }' "$raw"
}

# header: the summary's title and column names.
header() {
  echo "== summary (raw output: $raw)"
  printf '%-52s %12s %-6s %10s  %s\n' "figure" "value" "unit" "target" ""
}

# row WHAT VALUE UNIT TARGET(<=, empty for none) [SCALE]
row() {
  local what=$1 v=$2 unit=$3 target=$4 scale=${5:-1} verdict=""
  if [ -z "$v" ]; then
    printf '%-52s %12s %-6s %10s  %s\n' "$what" "n/a" "$unit" "${target:--}" "missing"
    return
  fi
  v=$(awk -v v="$v" -v s="$scale" 'BEGIN { printf "%.3g", v * s }')
  if [ -n "$target" ]; then
    verdict=$(awk -v v="$v" -v t="$target" 'BEGIN { print (v <= t) ? "within" : "OVER" }')
  fi
  printf '%-52s %12s %-6s %10s  %s\n' "$what" "$v" "$unit" "${target:+<= $target}" "$verdict"
}
