package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/drm"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/nvml"
)

// probeOptions selects and configures a GPU backend.
type probeOptions struct {
	Backend string   // auto | nvml | drm | sim | npu-smi
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
	envSysfs  = "GPUGUARD_SYSFS"
	envProcfs = "GPUGUARD_PROCFS"
)

// npuSMIOpenTimeout bounds the first `npu-smi info` run at open.
const npuSMIOpenTimeout = 30 * time.Second

// openProbe opens the chosen backend. Errors that mean "this backend cannot
// run here" wrap gpu.ErrUnavailable (exit 69); an unknown backend or a bad
// device selection is a plain error. auto is NVML if its driver library
// loads, else DRM if an amdgpu device with memory counters (or an Intel
// one whose driver reports its device memory) exists: both are found
// without changing anything, and the error names what each looked for.
func openProbe(o probeOptions) (gpu.Probe, error) {
	switch o.Backend {
	case "", "auto":
		p, err := openNVML(o)
		if err == nil || !errors.Is(err, gpu.ErrUnavailable) {
			return p, err
		}
		d, derr := openDRM(o, o.DRMDevices)
		if derr == nil || !errors.Is(derr, gpu.ErrUnavailable) {
			return d, derr
		}
		return nil, fmt.Errorf("%w: --backend auto found no GPU. %s. %s. Use --backend sim to run without a GPU",
			gpu.ErrUnavailable, unwrapUnavailable(err), unwrapUnavailable(derr))
	case "nvml":
		return openNVML(o)
	case "drm":
		return openDRM(o, o.Devices)
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
	return nil, fmt.Errorf("unknown backend %q: want %s", o.Backend, strings.Join(backends, ", "))
}

func openNVML(o probeOptions) (gpu.Probe, error) {
	return nvml.Open(nvml.Options{Devices: o.Devices, LibraryPath: o.NVMLLib, Logf: o.Logf})
}

func openDRM(o probeOptions, devices []string) (gpu.Probe, error) {
	p, err := drm.Open(drm.Options{Sysfs: o.Sysfs, Procfs: o.Procfs, Devices: devices})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// unwrapUnavailable is err's text without the leading "GPU backend
// unavailable: ", for an error that lists several backends.
func unwrapUnavailable(err error) string {
	return strings.TrimPrefix(err.Error(), gpu.ErrUnavailable.Error()+": ")
}

// selectDevices resolves the device selection: --devices when given (flag
// non-nil), else the variable that limits which devices the backend's
// children see. drmDevices is what auto uses if it falls back to DRM.
func selectDevices(backend string, flag *string, getenv func(string) string) (devices, drmDevices []string, err error) {
	if flag != nil {
		if devices, err = gpu.ParseDeviceList(*flag); err != nil {
			return nil, nil, fmt.Errorf("--devices: %w", err)
		}
		return devices, devices, nil
	}
	if backend == "auto" || backend == "drm" {
		if drmDevices, err = drm.VisibleDevices(getenv("ROCR_VISIBLE_DEVICES"), getenv("HIP_VISIBLE_DEVICES")); err != nil {
			return nil, nil, err
		}
		if backend == "drm" {
			return drmDevices, drmDevices, nil
		}
	}
	if v := visibleDevicesVar[backend]; v != "" {
		if devices, err = gpu.ParseDeviceList(getenv(v)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", v, err)
		}
	}
	return devices, drmDevices, nil
}
