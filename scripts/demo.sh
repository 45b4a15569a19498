#!/usr/bin/env bash
# The whole story on the simulated GPU, no GPU needed: build gpuguard, run
# the demo server under it (start in the best profile, a live step-down, a
# CUDA OOM, a restart one profile lower with the checkpoint restored), then
# summarise the event journal. State goes to a fresh temp dir unless
# GPUGUARD_STATE_DIR is set.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
go build -o "$bin_dir/gpuguard" .
export GPUGUARD_STATE_DIR="${GPUGUARD_STATE_DIR:-$bin_dir/state}"
echo "== gpuguard run (policy.toml: backend sim, 16 GiB GPU, ladder fp16 > int8 > int4)"
"$bin_dir/gpuguard" run "$@"
echo
echo "== gpuguard report demo"
"$bin_dir/gpuguard" report demo
