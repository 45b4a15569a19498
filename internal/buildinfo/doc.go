// Package buildinfo says which gpuguard this is: the version, the VCS
// revision and whether the tree was modified, from what the Go toolchain
// recorded (runtime/debug.ReadBuildInfo) or, taking precedence, from stamps
// set at link time. The Debian package build stamps them (scripts/package.sh)
// so that the packaged binary names the package's version even where the Go
// environment builds with -buildvcs=false and records no VCS settings.
package buildinfo
