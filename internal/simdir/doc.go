// Package simdir finds the simulated GPU's directory of usage files that
// `gpuguard sim` writes and `status --backend sim` reads: from a flag, the
// environment, the running instances (asked on their control sockets) or
// the state root. Its errors for a choice only the user can make are
// usage errors (package usage).
package simdir
