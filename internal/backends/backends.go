package backends

// Names of the backends that code outside the table branches on: policy's
// default, the status probe's "auto found nothing" hint, the sim's extra
// flags. They are names, not the table: the table (each row's variables
// and opener) is backends/open's Table, the one place a backend is added.
const (
	// Auto is NVML if its driver library loads, else DRM (the contract's
	// order): a choice among the others, not a backend of its own.
	Auto   = "auto"
	NVML   = "nvml"
	DRM    = "drm"
	Sim    = "sim"
	NPUSMI = "npu-smi"
)
