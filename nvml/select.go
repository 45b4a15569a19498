//go:build cgo

package nvml

import (
	"fmt"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// selectHandles resolves a device selection (nil = all) to handles in the
// order given. Indices and UUIDs are those NVML reports; an index is NVML's
// (PCI bus order), which is CUDA's only with CUDA_DEVICE_ORDER=PCI_BUS_ID.
func selectHandles(lib Library, sel []string) ([]gonvml.Device, error) {
	n, ret := lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("NVML: counting GPUs: %w", ret)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: NVML: the driver sees no GPU (use --backend sim to run without one)", gpu.ErrUnavailable)
	}
	if len(sel) == 0 {
		sel = make([]string, n)
		for i := range sel {
			sel[i] = strconv.Itoa(i)
		}
	}
	var out []gonvml.Device
	seen := make(map[string]bool)
	for _, e := range sel {
		h, key, err := resolve(lib, n, e)
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("NVML: device %q: GPU %s is listed twice", e, key)
		}
		seen[key] = true
		out = append(out, h)
	}
	return out, nil
}

// resolve finds one selection entry: an index, a full UUID or a unique
// UUID prefix. key identifies the GPU (its UUID) to catch duplicates.
func resolve(lib Library, n int, e string) (gonvml.Device, string, error) {
	if i, err := strconv.Atoi(e); err == nil {
		if i < 0 || i >= n {
			return nil, "", fmt.Errorf("NVML: device %q: no such GPU (NVML sees %d: 0-%d)", e, n, n-1)
		}
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			return nil, "", fmt.Errorf("NVML: GPU %d: %w", i, ret)
		}
		uuid, ret := h.GetUUID()
		if ret != gonvml.SUCCESS {
			return nil, "", fmt.Errorf("NVML: GPU %d: reading UUID: %w", i, ret)
		}
		return h, uuid, nil
	}
	if strings.HasPrefix(e, "MIG-") {
		return nil, "", fmt.Errorf("NVML: device %q: MIG instances are not supported; name the whole GPU", e)
	}
	if !strings.HasPrefix(e, "GPU-") {
		return nil, "", fmt.Errorf("NVML: device %q: want an index or a UUID (GPU-...)", e)
	}
	if h, ret := lib.DeviceGetHandleByUUID(e); ret == gonvml.SUCCESS {
		return h, e, nil
	}
	return resolvePrefix(lib, n, e)
}

// resolvePrefix matches a UUID prefix against every GPU NVML sees,
// skipping GPUs that do not answer.
func resolvePrefix(lib Library, n int, prefix string) (gonvml.Device, string, error) {
	var found gonvml.Device
	var foundUUID string
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			continue
		}
		uuid, ret := h.GetUUID()
		if ret != gonvml.SUCCESS || !strings.HasPrefix(uuid, prefix) {
			continue
		}
		if found != nil {
			return nil, "", fmt.Errorf("NVML: device %q: ambiguous, matches %s and %s", prefix, foundUUID, uuid)
		}
		found, foundUUID = h, uuid
	}
	if found == nil {
		return nil, "", fmt.Errorf("NVML: device %q: no GPU has this UUID", prefix)
	}
	return found, foundUUID, nil
}
