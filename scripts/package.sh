#!/usr/bin/env bash
# Build the Debian package for bare-metal hosts and print its path as the
# last line of stdout: dist/gpuguard_<version>_<arch>.deb (progress goes to
# stderr). Install it with
#   sudo apt install ./dist/gpuguard_*.deb
#
# Needs Go with cgo and a C compiler (the NVML backend), git, dpkg-deb
# (dpkg), dpkg-shlibdeps and dpkg-buildflags (dpkg-dev), strip (binutils)
# and gzip. The package is built for the Go toolchain's GOARCH; a cross
# build needs a cgo cross compiler (CC).
#
# The version comes from git (docs/operations.md, "Installing the Debian
# package"):
#   tag vX.Y.Z on HEAD            X.Y.Z
#   N commits after tag vX.Y.Z    X.Y.Z+gitN.g<rev12>
#   no tag                        0.0.0+gitN.g<rev12>, N = commits in HEAD
#   uncommitted changes           the above with ".dirty" appended
# A tag's "-" (v1.0.0-rc1) becomes "~", which Debian sorts before the
# release. GPUGUARD_VERSION overrides all of this (a tarball with no git).
# The binary is stamped with that version, so `gpuguard version` names it
# even where GOFLAGS has -buildvcs=false.
#
# GPUGUARD_DIST sets the output directory (default dist/ in the repo).
# `scripts/package.sh --version` prints the version and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
umask 022

die() { echo "package.sh: $*" >&2; exit 1; }
case ${1:-} in
  "") only_version=false ;;
  --version) only_version=true ;;
  *) die "usage: scripts/package.sh [--version]  (--version: print the package version and stop)" ;;
esac

maintainer="gpuguard developers <dev@gpuguard.invalid>"
dist=${GPUGUARD_DIST:-dist}

# --- version -----------------------------------------------------------
if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
  revision=$(git rev-parse HEAD)
  short=$(git rev-parse --short=12 HEAD)
  modified=false
  [ -z "$(git status --porcelain --untracked-files=no)" ] || modified=true
  : "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct)}"
else
  revision="" short="" modified=false
fi
if [ -n "${GPUGUARD_VERSION:-}" ]; then
  version=$GPUGUARD_VERSION
else
  [ -n "$revision" ] || die "not a git checkout: set GPUGUARD_VERSION"
  if desc=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
    tag=${desc%-*-g*}                       # v1.2.3 (or v1.2.3-rc1)
    n=${desc#"$tag"-}; n=${n%%-*}           # commits since the tag
    base=${tag#v}; base=${base//-/\~}
  else
    base=0.0.0
    n=$(git rev-list --count HEAD)
  fi
  version=$base
  [ "$n" = 0 ] || version="$base+git$n.g$short"
  [ "$modified" = false ] || version="$version.dirty"
fi
# A native Debian version: no epoch, no "-revision".
[[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] ||
  die "version \"$version\" is not a Debian native version (a digit, then letters, digits and . + ~)"
if [ "$only_version" = true ]; then echo "$version"; exit 0; fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date +%s)}

for tool in go dpkg-deb dpkg-shlibdeps dpkg-buildflags strip gzip; do
  command -v "$tool" >/dev/null || die "$tool is required (apt install dpkg-dev binutils gzip)"
done

goarch=$(go env GOARCH)
case $goarch in
  amd64 | arm64 | s390x | riscv64 | loong64) arch=$goarch ;;
  386) arch=i386 ;;
  arm) arch=armhf ;;
  ppc64le) arch=ppc64el ;;
  *) die "no Debian architecture for GOARCH=$goarch" ;;
esac

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
echo "package.sh: building gpuguard $version for $arch" >&2

# --- files -------------------------------------------------------------
install -d "$root/usr/bin" "$root/usr/lib/systemd/system" "$root/etc/gpuguard" \
  "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
  "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d" \
  "$root/usr/share/doc/gpuguard" "$root/DEBIAN"

# cgo on: without it the NVML backend is a stub. Its C part gets the
# hardening flags dpkg-buildflags gives every Debian C package (fortify,
# stack protector, relro), minus go-nvml's deprecation noise, and minus
# bindnow: go-nvml leaves the NVML symbols unresolved until it loads the
# driver's library, so resolving them all at start (-z now) fails with
# "undefined symbol" before main (scripts/deb/lintian-overrides).
# -s -w and strip: Debian ships stripped binaries. -trimpath: no build
# machine paths in the binary. PIE: as Debian builds its C programs.
bflags() { DEB_BUILD_MAINT_OPTIONS=hardening=+all,-bindnow dpkg-buildflags --get "$1"; }
stampPkg=github.com/gpuguard/gpuguard/internal/buildinfo
CGO_ENABLED=1 CGO_CFLAGS="$(bflags CFLAGS) -Wno-deprecated-declarations" \
  CGO_CPPFLAGS="$(bflags CPPFLAGS)" CGO_LDFLAGS="$(bflags LDFLAGS)" \
  go build -trimpath -buildmode=pie -o "$root/usr/bin/gpuguard" \
  -ldflags "-s -w -X $stampPkg.stampVersion=$version -X $stampPkg.stampRevision=$revision -X $stampPkg.stampModified=$modified" .
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/gpuguard"

# The unit as shipped in scripts/systemd, running the packaged binary.
sed -e '/^[[:space:]]*#/!s|/usr/local/bin/gpuguard|/usr/bin/gpuguard|g' \
  scripts/systemd/gpuguard@.service >"$root/usr/lib/systemd/system/gpuguard@.service"
grep -q '^ExecStart=/usr/bin/gpuguard run ' "$root/usr/lib/systemd/system/gpuguard@.service" ||
  die "scripts/systemd/gpuguard@.service: no ExecStart=/usr/local/bin/gpuguard run ... to point at /usr/bin"
# The weekly review page (a oneshot service and its timer) and the door
# (one endpoint for every instance's models), none enabled.
for unit in gpuguard-review@.service gpuguard-review@.timer gpuguard-door.service; do
  sed -e '/^[[:space:]]*#/!s|/usr/local/bin/gpuguard|/usr/bin/gpuguard|g' \
    "scripts/systemd/$unit" >"$root/usr/lib/systemd/system/$unit"
done
grep -q '^ExecStart=/usr/bin/gpuguard report %i --html ' "$root/usr/lib/systemd/system/gpuguard-review@.service" ||
  die "scripts/systemd/gpuguard-review@.service: no ExecStart=/usr/local/bin/gpuguard report ... to point at /usr/bin"
grep -q '^ExecStart=/usr/bin/gpuguard door' "$root/usr/lib/systemd/system/gpuguard-door.service" ||
  die "scripts/systemd/gpuguard-door.service: no ExecStart=/usr/local/bin/gpuguard door to point at /usr/bin"

install -m 0644 examples/policies/vllm.toml "$root/etc/gpuguard/example.toml"
echo /etc/gpuguard/example.toml >"$root/DEBIAN/conffiles"

go run ./scripts/gendocs -source "gpuguard $version" -man "$root/usr/share/man/man1" \
  -bash "$root/usr/share/bash-completion/completions/gpuguard" \
  -zsh "$root/usr/share/zsh/vendor-completions/_gpuguard" \
  -fish "$root/usr/share/fish/vendor_completions.d/gpuguard.fish"
gzip -9n "$root"/usr/share/man/man1/*.1

install -m 0644 scripts/deb/copyright "$root/usr/share/doc/gpuguard/copyright"
install -D -m 0644 scripts/deb/lintian-overrides "$root/usr/share/lintian/overrides/gpuguard"
{
  echo "gpuguard ($version) unstable; urgency=medium"
  echo
  echo "  * Built by scripts/package.sh from git revision"
  echo "    ${revision:-unknown}."
  echo
  echo " -- $maintainer  $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$root/usr/share/doc/gpuguard/changelog.gz"

install -m 0755 scripts/deb/postinst scripts/deb/prerm scripts/deb/postrm "$root/DEBIAN/"

# --- control -----------------------------------------------------------
# dpkg-shlibdeps reads debian/control from its working directory.
mkdir -p "$stage/src/debian"
printf 'Source: gpuguard\n\nPackage: gpuguard\nArchitecture: any\n' >"$stage/src/debian/control"
# --warnings=0: the NVML symbols it cannot resolve are go-nvml's, bound
# when the driver's library is loaded at run time.
depends=$(cd "$stage/src" && dpkg-shlibdeps --warnings=0 -O -e"$root/usr/bin/gpuguard")
depends=${depends#shlibs:Depends=}
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: gpuguard
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Suggests: libnvidia-ml1
Section: admin
Priority: optional
Homepage: https://github.com/gpuguard/gpuguard
Description: supervisor that keeps GPU inference servers out of OOM
 gpuguard launches a model server (vLLM, TGI, a PyTorch script) and watches
 GPU memory through NVML. As memory fills, it steps the server down a ladder
 of profiles declared in a policy file (lower precision, smaller batch), and
 after an out-of-memory exit it restarts the server one profile lower,
 keeping its checkpoint. Metrics, an event journal and a report make every
 fallback visible.
 .
 One systemd unit instance runs per policy: gpuguard@NAME.service reads
 /etc/gpuguard/NAME.toml; gpuguard-review@NAME.timer writes its weekly
 review page; gpuguard-door.service serves every instance's models on one
 endpoint, routed by the model a request names. An example policy for vLLM
 is installed as
 /etc/gpuguard/example.toml. NVML comes with the NVIDIA driver
 (libnvidia-ml.so.1), which gpuguard loads at run time.
EOF
(cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$dist"
deb=$dist/gpuguard_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
