// Package systemd holds no code. It is where the systemd template unit
// gpuguard@.service lives, and its test checks that unit: the settings the
// contract and GPU access depend on, and `systemd-analyze verify` where
// systemd is installed.
package systemd
