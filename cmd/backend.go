package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/nvml"
)

// probeOptions selects and configures a GPU backend.
type probeOptions struct {
	Backend    string   // auto | nvml | sim | npu-smi
	Devices    []string // indices or UUIDs; nil = all
	SimDir     string   // sim: the directory of per-device usage files
	SimDevices int
	SimMemory  uint64
	// NVMLLib is $GPUGUARD_NVML_LIB: the NVML driver library to load
	// instead of searching for it.
	NVMLLib string
	// Logf reports what a backend cannot return as an error; nil discards.
	Logf func(format string, args ...any)
}

// npuSMIOpenTimeout bounds the first `npu-smi info` run at open.
const npuSMIOpenTimeout = 30 * time.Second

// openProbe opens the chosen backend. Errors that mean "this backend cannot
// run here" wrap gpu.ErrUnavailable (exit 69); an unknown backend or a bad
// device selection is a plain error.
func openProbe(o probeOptions) (gpu.Probe, error) {
	switch o.Backend {
	case "", "auto", "nvml":
		// auto is NVML: it is the only backend that can be detected
		// without side effects, and its error says how to pick another.
		return nvml.Open(nvml.Options{Devices: o.Devices, LibraryPath: o.NVMLLib, Logf: o.Logf})
	case "sim":
		sel, err := gpu.IndexOnly(o.Devices)
		if err != nil {
			return nil, fmt.Errorf("--devices with the sim backend: %w", err)
		}
		s, err := gpu.NewSim(gpu.SimOptions{Dir: o.SimDir, Devices: o.SimDevices, Memory: o.SimMemory, Select: sel})
		if err != nil {
			return nil, err
		}
		return s, nil
	case "npu-smi":
		ctx, cancel := context.WithTimeout(context.Background(), npuSMIOpenTimeout)
		defer cancel()
		n, err := gpu.OpenNPUSMI(ctx, gpu.NPUSMIOptions{Select: o.Devices})
		if err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("unknown backend %q: want auto, nvml, sim or npu-smi", o.Backend)
}
