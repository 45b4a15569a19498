// Package deb holds no code. It is where the Debian package's own files
// live (copyright, maintainer scripts, lintian overrides), which
// scripts/package.sh assembles with the binary, the unit, the example
// policy, the man pages and the completions. Its tests derive the version
// from git in scratch repositories, then build the package (or take the one
// GPUGUARD_DEB names), unpack it with dpkg-deb and check what a host gets:
// the files, the conffiles, the unit (`systemd-analyze verify`), the
// binary's `version` and `policy check` of the shipped policy, and
// lintian's verdict. Each skips where its Debian tools are missing.
package deb
