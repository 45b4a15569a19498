// Package status gathers what `gpuguard status` shows: every instance's
// answer on its control socket, the stale sockets swept, and, when no
// instance answers, the GPUs read with the command's own backend, each
// GPU process named by command and user.
//
// The command (cmd/status.go) parses flags and renders; this package does
// the I/O between. It reads the GPUs itself only when no instance answers,
// which is when the host is most likely sick. A backend call stuck in a
// driver (an NVML call on a GPU falling off the bus, a sysfs read that
// blocks) cannot be interrupted, so each runs on a goroutine of its own
// and status stops waiting for it after ProbeTimeout: it answers with a
// warning, as for any other failed reading, and never hangs as nvidia-smi
// does.
package status
