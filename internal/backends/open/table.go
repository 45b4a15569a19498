package open

import (
	"strings"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/backends"
)

// Backend is one row of the table: everything about a backend that is
// not in its own package.
type Backend struct {
	Name string
	// Visible are the variables that limit which devices the backend's
	// children see, in the order they apply; their value is the default
	// --devices. None for the simulated GPU: CUDA_VISIBLE_DEVICES names
	// real GPUs. DRM has two (HIP_VISIBLE_DEVICES indexes what
	// ROCR_VISIBLE_DEVICES leaves); auto has NVML's, and DRM's when it
	// falls back to DRM.
	Visible []string
	// Open opens the backend (TestTable fails for a row without one).
	Open func(o Options) (gpu.Probe, error)
	// ReadVisible reads Visible into a selection (nil: all devices); nil
	// reads the one variable as a device list.
	ReadVisible func(vars []string, getenv func(string) string) ([]string, error)
}

// Table is every backend, in the order help and errors list them (the
// contract's --backend list). It is the one place that imports each
// backend's package. Each call returns a fresh copy: nobody can change
// the table for others.
func Table() []Backend {
	return []Backend{
		{Name: backends.Auto, Visible: []string{"CUDA_VISIBLE_DEVICES"}, Open: openAuto},
		{Name: backends.NVML, Visible: []string{"CUDA_VISIBLE_DEVICES"}, Open: openNVML},
		{Name: backends.DRM, Visible: []string{"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"},
			Open: func(o Options) (gpu.Probe, error) { return openDRM(o, o.Devices) }, ReadVisible: drmVisible},
		{Name: backends.Sim, Open: openSim},
		{Name: backends.NPUSMI, Visible: []string{"ASCEND_RT_VISIBLE_DEVICES"}, Open: openNPUSMI},
	}
}

// Names are the backends' names, in the table's order: what --backend
// and [watch] backend (through policy.Backends) take.
func Names() []string {
	t := Table()
	names := make([]string, len(t))
	for i, b := range t {
		names[i] = b.Name
	}
	return names
}

// Lookup returns the row of the backend called name.
func Lookup(name string) (Backend, bool) {
	for _, b := range Table() {
		if b.Name == name {
			return b, true
		}
	}
	return Backend{}, false
}

// List is the names for a sentence: "auto, nvml, drm, sim or npu-smi".
func List() string {
	n := Names()
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}
