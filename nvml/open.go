//go:build cgo

package nvml

import (
	"fmt"
	"os"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// Library is the NVML API the probe uses: go-nvml's Interface, the real
// library or a fake.
type Library = gonvml.Interface

// defaultLibrary is what go-nvml dlopens when no path is given.
const defaultLibrary = "libnvidia-ml.so.1"

// Open initialises NVML and resolves the selected devices. Failing to
// initialise NVML (no driver library, driver not loaded, version mismatch)
// and finding no GPU wrap gpu.ErrUnavailable; a selection entry that names
// no GPU is a plain error.
func Open(o Options) (gpu.Probe, error) {
	lib := o.Lib
	if lib == nil {
		var opts []gonvml.LibraryOption
		if o.LibraryPath != "" {
			opts = append(opts, gonvml.WithLibraryPath(o.LibraryPath))
		}
		lib = gonvml.New(opts...)
	}
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return nil, initError(o, ret)
	}
	p, err := newProbe(lib, o)
	if err != nil {
		lib.Shutdown()
		return nil, err
	}
	return p, nil
}

// initError explains a failed nvmlInit; every cause means "no NVIDIA GPU
// can be watched here", so all wrap gpu.ErrUnavailable.
func initError(o Options, ret gonvml.Return) error {
	const hint = "use --backend sim to run without a GPU"
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		if o.LibraryPath != "" {
			return fmt.Errorf("%w: NVML: cannot load %s; is the NVIDIA driver installed? (%s)",
				gpu.ErrUnavailable, o.LibraryPath, hint)
		}
		return fmt.Errorf("%w: NVML: cannot load %s, looked up by the dynamic loader "+
			"(LD_LIBRARY_PATH=%q, then the ld.so cache and /lib, /usr/lib); is the NVIDIA driver installed? (%s)",
			gpu.ErrUnavailable, defaultLibrary, os.Getenv("LD_LIBRARY_PATH"), hint)
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w: NVML: the NVIDIA kernel driver is not loaded (%w) (%s)", gpu.ErrUnavailable, ret, hint)
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return fmt.Errorf("%w: NVML: the driver library and kernel module versions differ; reload the nvidia module or reboot (%w)", gpu.ErrUnavailable, ret)
	case gonvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("%w: NVML: no permission to open the GPU device files /dev/nvidia* (%w)", gpu.ErrUnavailable, ret)
	}
	return fmt.Errorf("%w: NVML: initialising: %w (%s)", gpu.ErrUnavailable, ret, hint)
}
