package cmd

import (
	"fmt"

	"github.com/gpuguard/gpuguard/gpu"
)

// probeOptions selects and configures a GPU backend.
type probeOptions struct {
	Backend    string   // auto | nvml | sim | npu-smi
	Devices    []string // indices or UUIDs; nil = all
	SimDir     string   // sim: the directory of per-device usage files
	SimDevices int
	SimMemory  uint64
}

// openProbe opens the chosen backend. Errors that mean "this backend cannot
// run here" wrap gpu.ErrUnavailable (exit 69).
func openProbe(o probeOptions) (gpu.Probe, error) {
	return nil, fmt.Errorf("backend %q: %w (not yet implemented)", o.Backend, gpu.ErrUnavailable)
}
