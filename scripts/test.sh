#!/usr/bin/env bash
# The test command: vet, both builds, the Go tests under the race detector
# (end-to-end tests build and run the real binary on the simulated GPU), the
# Debian package (built, unpacked, checked and linted; skipped without
# dpkg-dev), the Kubernetes manifests' offline validation
# (deploy/kubernetes/validate, a Go module of its own so that gpuguard's
# go.mod stays free of Kubernetes modules), the review page in chromium
# (internal/review/browsertest, a module of its own too), the Python client's tests
# against the real binary, and scripts/tests: scripts/gpu_smoke.py's figures
# and verdicts from sample logs and journals (it runs once, on a GPU
# machine, where a crash or a wrong figure wastes the run).
# Long soak and fuzz runs are separate: scripts/soak.sh, scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== build (cgo and CGO_ENABLED=0)"
go build ./...
CGO_ENABLED=0 go build -o /dev/null .
echo "== go test -race"
# scripts/deb runs next, on its own and verbose, so that lintian's verdict
# shows in the log.
go test -race -count=1 -timeout 15m $(go list ./... | grep -v '/scripts/deb$')
echo "== Debian package: scripts/package.sh, its contents, lintian"
go test -count=1 -timeout 10m -v ./scripts/deb
echo "== kubernetes manifests (deploy/kubernetes/validate)"
(cd deploy/kubernetes/validate && go vet ./... && go test -count=1 -timeout 10m ./...)
echo "== review page in chromium (internal/review/browsertest)"
# A module of its own (chromedp stays out of gpuguard's go.mod); it skips
# without chromium unless CI is set.
(cd internal/review/browsertest && go vet ./... && go test -count=1 -timeout 10m ./...)
if [ -d clients/python/tests ]; then
  echo "== python client"
  bin_dir=$(mktemp -d)
  trap 'rm -rf "$bin_dir"' EXIT
  go build -o "$bin_dir/gpuguard" .
  GPUGUARD_BIN="$bin_dir/gpuguard" PYTHONPATH=clients/python \
    python3 -m unittest discover -s clients/python/tests -t clients/python
fi
echo "== gpu_smoke.py (scripts/tests)"
python3 -m unittest discover -s scripts/tests
