//go:build cgo

package nvml

import (
	"fmt"
	"runtime"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// Library is the NVML API the probe uses: go-nvml's Interface, the real
// library or a fake.
type Library = gonvml.Interface

// Open initialises NVML and resolves the selected devices. Failing to
// initialise NVML (no driver library, driver not loaded, version mismatch)
// and finding no GPU wrap gpu.ErrUnavailable; a selection entry that names
// no GPU is a plain error.
func Open(o Options) (gpu.Probe, error) {
	lib := o.Lib
	if lib == nil {
		var err error
		if lib, err = load(o, "/", realLibrary); err != nil {
			return nil, err
		}
	} else if ret := lib.Init(); ret != gonvml.SUCCESS {
		return nil, initError(o, ret)
	}
	p, err := newProbe(lib, o)
	if err != nil {
		lib.Shutdown()
		return nil, err
	}
	return p, nil
}

// realLibrary is go-nvml's library at path ("" = found by the dynamic
// loader).
func realLibrary(path string) Library {
	if path == "" {
		return gonvml.New()
	}
	return gonvml.New(gonvml.WithLibraryPath(path))
}

// load initialises NVML from the first driver library that loads:
// o.LibraryPath alone when set, else the one the dynamic loader finds,
// else each one findLibrary finds under root. newLib makes the library
// for a path (tests pass fakes).
func load(o Options, root string, newLib func(path string) Library) (Library, error) {
	if o.LibraryPath != "" {
		lib := newLib(o.LibraryPath)
		if ret := lib.Init(); ret != gonvml.SUCCESS {
			return nil, initError(o, ret)
		}
		return lib, nil
	}
	lib := newLib("")
	ret := lib.Init()
	if ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
		found, _ := findLibrary(root, libraryDirs(runtime.GOARCH))
		for _, p := range found {
			lib = newLib(p)
			if ret = lib.Init(); ret != gonvml.ERROR_LIBRARY_NOT_FOUND {
				break
			}
		}
	}
	if ret != gonvml.SUCCESS {
		return nil, initError(o, ret)
	}
	return lib, nil
}

// initError explains a failed nvmlInit; every cause means "no NVIDIA GPU
// can be watched here", so all wrap gpu.ErrUnavailable. Each says it in a
// few words (not found: after the dynamic loader, in every one of
// libraryDirs, which docs/gpus.md lists); the command adds what to do
// without a GPU (--backend sim).
func initError(o Options, ret gonvml.Return) error {
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		if o.LibraryPath != "" {
			return fmt.Errorf("%w: NVML: cannot load %s (named by %s)", gpu.ErrUnavailable, o.LibraryPath, EnvLibrary)
		}
		return fmt.Errorf("%w: NVML: %s not found (%s=PATH names it)", gpu.ErrUnavailable, libraryName, EnvLibrary)
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w: NVML: the NVIDIA kernel driver is not loaded (%w)", gpu.ErrUnavailable, ret)
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return fmt.Errorf("%w: NVML: the driver library and kernel module versions differ; reload the nvidia module or reboot (%w)", gpu.ErrUnavailable, ret)
	case gonvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("%w: NVML: no permission to open the GPU device files /dev/nvidia* (%w)", gpu.ErrUnavailable, ret)
	}
	return fmt.Errorf("%w: NVML: initialising: %w", gpu.ErrUnavailable, ret)
}
