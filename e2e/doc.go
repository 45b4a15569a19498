// Package e2e runs the real gpuguard binary with real child processes on
// the simulated GPU: every behaviour of the contract that a user can see
// from outside (exit codes, the child's environment, the state file,
// checkpoints, signals, the control socket, metrics, sd_notify) has a test
// here that would fail if it were lost.
package e2e
