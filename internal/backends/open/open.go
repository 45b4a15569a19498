package open

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/backends"
	"github.com/gpuguard/gpuguard/internal/drm"
	"github.com/gpuguard/gpuguard/internal/npusmi"
	"github.com/gpuguard/gpuguard/nvml"
)

// Options selects and configures a GPU backend.
type Options struct {
	Backend string   // a name in Table
	Devices []string // indices or UUIDs; nil = all
	// DRMDevices is the selection auto uses when it falls back to DRM
	// (without --devices the defaults differ: CUDA_VISIBLE_DEVICES names
	// NVIDIA GPUs, ROCR_VISIBLE_DEVICES AMD ones).
	DRMDevices []string
	SimDir     string // sim: the directory of per-device usage files
	SimDevices int
	SimMemory  uint64
	// NVMLLib is $GPUGUARD_NVML_LIB: the NVML driver library to load
	// instead of searching for it.
	NVMLLib string
	// Sysfs and Procfs are $GPUGUARD_SYSFS and $GPUGUARD_PROCFS: where
	// the DRM backend reads ("" = /sys and /proc).
	Sysfs, Procfs string
	// Logf reports what a backend cannot return as an error; nil discards.
	Logf func(format string, args ...any)
}

// Variables that relocate the DRM backend's reads, like node_exporter's
// --path.sysfs and --path.procfs.
const (
	EnvSysfs  = "GPUGUARD_SYSFS"
	EnvProcfs = "GPUGUARD_PROCFS"
)

// FromEnv fills the options that come from the environment: the NVML
// library and the DRM backend's sysfs and procfs roots.
func (o *Options) FromEnv(getenv func(string) string) {
	o.NVMLLib, o.Sysfs, o.Procfs = getenv(nvml.EnvLibrary), getenv(EnvSysfs), getenv(EnvProcfs)
}

// npuSMIOpenTimeout bounds the first `npu-smi info` run at open.
const npuSMIOpenTimeout = 30 * time.Second

// Probe opens the chosen backend. Errors that mean "this backend cannot
// run here" wrap gpu.ErrUnavailable (exit 69); an unknown backend or a bad
// device selection is a plain error.
func Probe(o Options) (gpu.Probe, error) {
	if o.Backend == "" {
		o.Backend = backends.Auto
	}
	b, ok := Lookup(o.Backend)
	if !ok {
		return nil, fmt.Errorf("unknown backend %q: want %s", o.Backend, List())
	}
	return b.Open(o)
}

// openAuto is NVML if its driver library loads, else DRM if an amdgpu
// device with memory counters (or an Intel one whose driver reports its
// device memory) exists: both are found without changing anything, and the
// error names what each looked for.
func openAuto(o Options) (gpu.Probe, error) {
	p, err := openNVML(o)
	if err == nil || !errors.Is(err, gpu.ErrUnavailable) {
		return p, err
	}
	d, derr := openDRM(o, o.DRMDevices)
	if derr == nil || !errors.Is(derr, gpu.ErrUnavailable) {
		return d, derr
	}
	return nil, &NoGPU{NVML: err, DRM: derr}
}

func openSim(o Options) (gpu.Probe, error) {
	sel, err := gpu.IndexOnly(o.Devices)
	if err != nil {
		return nil, fmt.Errorf("--devices with the sim backend: %w", err)
	}
	s, err := gpu.NewSim(gpu.SimOptions{Dir: o.SimDir, Devices: o.SimDevices, Memory: o.SimMemory, Select: sel})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openNPUSMI(o Options) (gpu.Probe, error) {
	ctx, cancel := context.WithTimeout(context.Background(), npuSMIOpenTimeout)
	defer cancel()
	n, err := npusmi.Open(ctx, npusmi.Options{Select: o.Devices})
	if err != nil {
		return nil, err
	}
	return n, nil
}

func openNVML(o Options) (gpu.Probe, error) {
	return nvml.Open(nvml.Options{Devices: o.Devices, LibraryPath: o.NVMLLib, Logf: o.Logf})
}

func openDRM(o Options, devices []string) (gpu.Probe, error) {
	p, err := drm.Open(drm.Options{Sysfs: o.Sysfs, Procfs: o.Procfs, Devices: devices})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// NoGPU is --backend auto finding no GPU: neither NVML nor DRM could watch
// one here, each error saying why.
type NoGPU struct{ NVML, DRM error }

func (e *NoGPU) Error() string {
	return fmt.Sprintf("%v: no GPU found: %s; %s", gpu.ErrUnavailable, unwrapUnavailable(e.NVML), unwrapUnavailable(e.DRM))
}

func (e *NoGPU) Unwrap() error { return gpu.ErrUnavailable }

// NotFound tells an unavailable backend (an error that wraps
// gpu.ErrUnavailable) as run's exit 69 says it: a short line for each
// backend looked for, saying what it did not find.
//
//	no GPU found: NVML: libnvidia-ml.so.1 not found (GPUGUARD_NVML_LIB=PATH names it)
//	no GPU found: DRM: no AMD or Intel GPU with memory counters under /sys/class/drm
func NotFound(err error) []string {
	var none *NoGPU
	if errors.As(err, &none) {
		return []string{"no GPU found: " + unwrapUnavailable(none.NVML), "no GPU found: " + unwrapUnavailable(none.DRM)}
	}
	return []string{"no GPU found: " + unwrapUnavailable(err)}
}

// unwrapUnavailable is err's text without the leading "GPU backend
// unavailable: ", for an error that lists several backends.
func unwrapUnavailable(err error) string {
	return strings.TrimPrefix(err.Error(), gpu.ErrUnavailable.Error()+": ")
}

// drmVisible is ROCm's rule: HIP_VISIBLE_DEVICES indexes what
// ROCR_VISIBLE_DEVICES leaves (drm.VisibleDevices).
func drmVisible(vars []string, getenv func(string) string) ([]string, error) {
	return drm.VisibleDevices(getenv(vars[0]), getenv(vars[1]))
}

// Opened names the backend that runs, for run's start-up line: auto's
// choice, and the sim dir of the simulated GPU. asked is the backend
// asked for, probe what Probe opened.
func Opened(asked string, probe gpu.Probe, simDir string) string {
	switch asked {
	case "", backends.Auto:
		if _, ok := probe.(*drm.Probe); ok {
			return "drm (auto)"
		}
		return "nvml (auto)"
	case backends.Sim:
		return "sim (sim dir " + simDir + ")"
	}
	return asked
}
