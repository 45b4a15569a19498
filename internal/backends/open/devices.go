package open

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/backends"
)

// SelectDevices resolves the device selection: --devices when given (flag
// non-nil), else the variables that limit which devices the backend's
// children see (its row's Visible). drmDevices is what auto uses if it
// falls back to DRM. name must be a known backend.
func SelectDevices(name string, flag *string, getenv func(string) string) (devices, drmDevices []string, err error) {
	if flag != nil {
		if devices, err = gpu.ParseDeviceList(*flag); err != nil {
			return nil, nil, fmt.Errorf("--devices: %w", err)
		}
		return devices, devices, nil
	}
	if devices, err = visibleDevices(name, getenv); err != nil {
		return nil, nil, err
	}
	switch name {
	case backends.Auto:
		if drmDevices, err = visibleDevices(backends.DRM, getenv); err != nil {
			return nil, nil, err
		}
	case backends.DRM:
		drmDevices = devices
	}
	return devices, drmDevices, nil
}

// visibleDevices is the default selection of backend name: what its
// visible-devices variables say (nil: all, or a backend without any).
func visibleDevices(name string, getenv func(string) string) ([]string, error) {
	b, _ := Lookup(name)
	if len(b.Visible) == 0 {
		return nil, nil
	}
	if b.ReadVisible != nil {
		return b.ReadVisible(b.Visible, getenv)
	}
	devices, err := gpu.ParseDeviceList(getenv(b.Visible[0]))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Visible[0], err)
	}
	return devices, nil
}

// DevicesDefaultHelp is what --devices help says of the default, from the
// backend table: "(default CUDA_VISIBLE_DEVICES; for drm
// ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES; for npu-smi
// ASCEND_RT_VISIBLE_DEVICES; else all)".
func DevicesDefaultHelp() string {
	def, _ := Lookup(backends.Auto)
	parts := []string{"default " + strings.Join(def.Visible, "/")}
	for _, b := range Table() {
		if len(b.Visible) > 0 && !slices.Equal(b.Visible, def.Visible) {
			parts = append(parts, "for "+b.Name+" "+strings.Join(b.Visible, "/"))
		}
	}
	return "(" + strings.Join(parts, "; ") + "; else all)"
}
