package backends

import "strings"

// Names of the backends.
const (
	// Auto is NVML if its driver library loads, else DRM (the contract's
	// order): a choice among the others, not a backend of its own.
	Auto   = "auto"
	NVML   = "nvml"
	DRM    = "drm"
	Sim    = "sim"
	NPUSMI = "npu-smi"
)

// Backend is one row of the table.
type Backend struct {
	Name string
	// Visible are the variables that limit which devices the backend's
	// children see, in the order they apply; their value is the default
	// --devices. None for the simulated GPU: CUDA_VISIBLE_DEVICES names
	// real GPUs. DRM has two (HIP_VISIBLE_DEVICES indexes what
	// ROCR_VISIBLE_DEVICES leaves); auto has NVML's, and DRM's when it
	// falls back to DRM.
	Visible []string
}

// Table is every backend, in the order help and errors list them. Each
// call returns a fresh copy: nobody can change the table for others.
func Table() []Backend {
	return []Backend{
		{Name: Auto, Visible: []string{"CUDA_VISIBLE_DEVICES"}},
		{Name: NVML, Visible: []string{"CUDA_VISIBLE_DEVICES"}},
		{Name: DRM, Visible: []string{"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}},
		{Name: Sim},
		{Name: NPUSMI, Visible: []string{"ASCEND_RT_VISIBLE_DEVICES"}},
	}
}

// Names are the backends' names, in the table's order.
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
