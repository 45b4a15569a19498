#!/usr/bin/env bash
# The whole story on the simulated GPU, no GPU needed: build gpuguard, run
# the demo server under it (start in the best profile, a live step-down, a
# CUDA OOM, a restart one profile lower with the checkpoint restored), then
# summarise the event journal.
#
# Everything it writes stays in one temp dir, removed at the end, root or
# not: the binary, the state dir (journal, checkpoint, sim dir) unless
# GPUGUARD_STATE_DIR is set, the runtime dir (the control socket) unless
# GPUGUARD_RUNTIME_DIR is set, and no __pycache__ in the checkout. (Go's
# own caches fill as for any build: GOCACHE, GOMODCACHE.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUGUARD_STATE_DIR="${GPUGUARD_STATE_DIR:-$tmp/state}"
export GPUGUARD_RUNTIME_DIR="${GPUGUARD_RUNTIME_DIR:-$tmp/run}"
export PYTHONDONTWRITEBYTECODE=1
# go-nvml's nvml.h marks old NVML calls deprecated, and its cgo code names
# them: a first build would print ~150 warnings.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
bin=${GPUGUARD_BIN:-}  # a gpuguard built before (the e2e test of this script)
if [ -z "$bin" ]; then
  echo "== go build (the first build downloads and compiles gpuguard's modules: about 2 minutes on 2 cores; then seconds)"
  bin=$tmp/gpuguard
  # Its output ("go: downloading ...") is shown only if it fails.
  if ! out=$(go build -o "$bin" . 2>&1); then
    printf '%s\n' "$out" >&2
    exit 1
  fi
fi
echo "== gpuguard run (policy.toml: backend sim, 16 GiB GPU, ladder fp16 > int8 > int4)"
"$bin" run "$@"
echo
echo "== gpuguard report demo"
"$bin" report demo
