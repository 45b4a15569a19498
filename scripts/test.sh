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
# go-nvml's nvml.h marks old NVML calls deprecated, and its cgo code
# names them: without this, a cold build prints ~150 warnings.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
work=$(mktemp -d)
deb_pid=
trap '[ -z "$deb_pid" ] || kill -- -"$deb_pid" 2>/dev/null; rm -rf "$work"' EXIT

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== build (cgo and CGO_ENABLED=0), and the binaries the tests run"
# One build of each kind serves every package and module that runs
# gpuguard (e2e, the Kubernetes and browser checks, the Python client):
# internal/testbin reads GPUGUARD_BIN and GPUGUARD_RACE_BIN.
go build ./...
go build -o "$work/gpuguard" .
go build -race -o "$work/gpuguard-race" .
CGO_ENABLED=0 go build -o /dev/null .
export GPUGUARD_BIN="$work/gpuguard" GPUGUARD_RACE_BIN="$work/gpuguard-race"
# The Debian package is a third build of everything (-trimpath, PIE, the
# hardening flags); it builds beside the tests, which spend much of their
# time waiting, and scripts/deb checks it once the tests are done.
# (The tools are scripts/deb's: without them its test skips.)
deb_tools=true
for tool in git dpkg-deb dpkg-shlibdeps dpkg-buildflags strip gzip; do
  command -v "$tool" >/dev/null || deb_tools=false
done
if [ "$deb_tools" = true ]; then
  GPUGUARD_DIST="$work/dist" GOFLAGS=-buildvcs=false \
    setsid scripts/package.sh >"$work/deb.path" 2>"$work/deb.log" &
  deb_pid=$!
fi
echo "== go test -race"
# scripts/deb runs next, on its own and verbose, so that lintian's verdict
# shows in the log. -vet=off: go vet ./... above checked every package with
# its tests, with all of vet's analyzers (go test runs a few of them again).
go test -race -vet=off -count=1 -timeout 15m $(go list ./... | grep -v '/scripts/deb$')
echo "== Debian package: scripts/package.sh, its contents, lintian"
deb=
if [ -n "$deb_pid" ]; then
  status=0
  wait "$deb_pid" || status=$?
  deb_pid=
  if [ "$status" != 0 ]; then cat "$work/deb.log"; echo "scripts/package.sh failed ($status)"; exit 1; fi
  deb=$(tail -n 1 "$work/deb.path")
fi
GPUGUARD_DEB="$deb" go test -count=1 -timeout 10m -v ./scripts/deb
echo "== kubernetes manifests (deploy/kubernetes/validate)"
(cd deploy/kubernetes/validate && go vet ./... && go test -count=1 -timeout 10m ./...)
echo "== review page in chromium (internal/review/browsertest)"
# A module of its own (chromedp stays out of gpuguard's go.mod); it skips
# without chromium unless CI is set.
(cd internal/review/browsertest && go vet ./... && go test -count=1 -timeout 10m ./...)
if [ -d clients/python/tests ]; then
  echo "== python client"
  PYTHONPATH=clients/python python3 -m unittest discover -s clients/python/tests -t clients/python
fi
echo "== gpu_smoke.py (scripts/tests)"
python3 -m unittest discover -s scripts/tests
