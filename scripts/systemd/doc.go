// Package systemd holds no code. It is where the systemd units live: the
// template gpuguard@.service, and gpuguard-review@.service with its weekly
// gpuguard-review@.timer, which write an instance's review page. Its tests
// check them: the settings the contract and GPU access depend on, and
// `systemd-analyze verify` where systemd is installed.
package systemd
