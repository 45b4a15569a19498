package drm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuguard/gpuguard/gpu"
)

// VisibleDevices is the default device selection for the DRM backend, as
// ROCm applies its variables: ROCR_VISIBLE_DEVICES (indices or UUIDs)
// picks from all GPUs, then HIP_VISIBLE_DEVICES (indices) picks from what
// ROCR left. Empty values mean all; nil is all.
func VisibleDevices(rocr, hip string) ([]string, error) {
	base, err := gpu.ParseDeviceList(rocr)
	if err != nil {
		return nil, fmt.Errorf("ROCR_VISIBLE_DEVICES: %w", err)
	}
	sel, err := gpu.ParseDeviceList(hip)
	if err != nil {
		return nil, fmt.Errorf("HIP_VISIBLE_DEVICES: %w", err)
	}
	if sel == nil || base == nil {
		if sel == nil {
			return base, nil
		}
		return sel, nil
	}
	out := make([]string, 0, len(sel))
	for _, e := range sel {
		i, err := strconv.Atoi(e)
		if err != nil || i < 0 || i >= len(base) {
			return nil, fmt.Errorf("HIP_VISIBLE_DEVICES: %q: want an index below %d (the GPUs ROCR_VISIBLE_DEVICES=%s leaves)", e, len(base), rocr)
		}
		out = append(out, base[i])
	}
	return out, nil
}

// resolve finds one selection entry among the devices found: an index
// (ROCm's), a UUID or unique UUID prefix (GPU-<unique_id>, any case, as
// ROCm takes it), or a PCI address (0000:03:00.0, or 03:00.0 in domain
// 0). usable are the devices with memory counters, in ROCm order (their
// position is their index); others are the rest, named in errors.
func resolve(e string, usable, others []card) (int, error) {
	if i, err := strconv.Atoi(e); err == nil {
		if i < 0 || i >= len(usable) {
			return 0, fmt.Errorf("DRM: device %q: no such GPU (%d with memory counters: 0-%d)", e, len(usable), len(usable)-1)
		}
		return i, nil
	}
	if strings.HasPrefix(strings.ToUpper(e), "GPU-") {
		want := strings.ToUpper(e)
		found := -1
		for i, c := range usable {
			if strings.HasPrefix(c.uuid, want) {
				if found >= 0 {
					return 0, fmt.Errorf("DRM: device %q: ambiguous, matches %s and %s", e, usable[found].uuid, c.uuid)
				}
				found = i
			}
		}
		if found < 0 {
			return 0, fmt.Errorf("DRM: device %q: no GPU has this UUID", e)
		}
		return found, nil
	}
	pci := strings.ToLower(e)
	if strings.Count(pci, ":") == 1 {
		pci = "0000:" + pci
	}
	for i, c := range usable {
		if c.pci == pci {
			return i, nil
		}
	}
	for _, c := range others {
		if c.pci == pci {
			return 0, fmt.Errorf("DRM: device %q (%s, %s): %s", e, c.node, c.name, c.why)
		}
	}
	if strings.Count(pci, ":") == 2 {
		return 0, fmt.Errorf("DRM: device %q: no DRM device at this PCI address", e)
	}
	return 0, fmt.Errorf("DRM: device %q: want an index, a UUID (GPU-...) or a PCI address (0000:03:00.0)", e)
}
