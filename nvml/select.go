//go:build cgo

package nvml

import (
	"fmt"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// target is one device to watch: a whole GPU or a MIG instance.
type target struct {
	h     gonvml.Device
	index int // gpuguard's index (see inventory)
	uuid  string
	// parent is the whole GPU's UUID (a whole GPU's own): NVML reports
	// fault events per whole GPU.
	parent string
	gi, ci int // a MIG instance's GPU and compute instance ids; -1 otherwise
}

// inventory is what NVML sees: n whole GPUs, indexed 0..n-1 as NVML
// does, and the MIG instances on those with MIG enabled, indexed n, n+1,
// ... in the order of their parents and of NVML's MIG device index. An
// index must name one device (processes are matched to devices by it),
// and NVML's own MIG index repeats on every GPU.
type inventory struct {
	lib    Library
	n      int
	migs   []target
	listed bool // migs is filled in
}

// selectTargets resolves a device selection (nil = all) to targets in the
// order given. Indices and UUIDs are those NVML reports; an index is
// NVML's (PCI bus order), which is CUDA's only with
// CUDA_DEVICE_ORDER=PCI_BUS_ID. "All" is every whole GPU, except that a
// GPU with MIG enabled is replaced by its MIG instances: on such a GPU,
// CUDA runs on instances, and the whole GPU's memory figures are
// aggregates only privileged callers may read.
func selectTargets(lib Library, sel []string) ([]target, error) {
	n, ret := lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("NVML: counting GPUs: %w", ret)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: NVML: the driver sees no GPU", gpu.ErrUnavailable)
	}
	inv := &inventory{lib: lib, n: n}
	if len(sel) == 0 {
		return inv.all()
	}
	var out []target
	seen := make(map[string]bool)
	for _, e := range sel {
		t, err := inv.resolve(e)
		if err != nil {
			return nil, err
		}
		if seen[t.uuid] {
			return nil, fmt.Errorf("NVML: device %q: GPU %s is listed twice", e, t.uuid)
		}
		seen[t.uuid] = true
		out = append(out, t)
	}
	return out, nil
}

// all is every whole GPU, or its MIG instances when it has MIG enabled.
func (inv *inventory) all() ([]target, error) {
	if err := inv.listMIG(); err != nil {
		return nil, err
	}
	var out []target
	for i := range inv.n {
		t, err := inv.whole(i)
		if err != nil {
			return nil, err
		}
		var migs []target
		for _, m := range inv.migs {
			if m.parent == t.uuid {
				migs = append(migs, m)
			}
		}
		if len(migs) == 0 {
			migs = []target{t}
		}
		out = append(out, migs...)
	}
	return out, nil
}

// whole is whole GPU i.
func (inv *inventory) whole(i int) (target, error) {
	h, ret := inv.lib.DeviceGetHandleByIndex(i)
	if ret != gonvml.SUCCESS {
		return target{}, fmt.Errorf("NVML: GPU %d: %w", i, ret)
	}
	uuid, ret := h.GetUUID()
	if ret != gonvml.SUCCESS {
		return target{}, fmt.Errorf("NVML: GPU %d: reading UUID: %w", i, ret)
	}
	return target{h: h, index: i, uuid: uuid, parent: uuid, gi: -1, ci: -1}, nil
}

// resolve finds one selection entry: an index, a full UUID or a unique
// UUID prefix, of a whole GPU (GPU-...) or a MIG instance (MIG-..., or
// the old MIG-GPU-<uuid>/<gi>/<ci> form).
func (inv *inventory) resolve(e string) (target, error) {
	if i, err := strconv.Atoi(e); err == nil {
		return inv.byIndex(e, i)
	}
	switch {
	case strings.HasPrefix(e, "MIG-GPU-") && strings.Contains(e, "/"):
		return inv.byLegacyMIG(e)
	case strings.HasPrefix(e, "MIG-"):
		return inv.byMIGUUID(e)
	case strings.HasPrefix(e, "GPU-"):
		if h, ret := inv.lib.DeviceGetHandleByUUID(e); ret == gonvml.SUCCESS {
			i, ret := h.GetIndex()
			if ret != gonvml.SUCCESS {
				return target{}, fmt.Errorf("NVML: GPU %s: reading its index: %w", e, ret)
			}
			return target{h: h, index: i, uuid: e, parent: e, gi: -1, ci: -1}, nil
		}
		return inv.byPrefix(e)
	}
	return target{}, fmt.Errorf("NVML: device %q: want an index or a UUID (GPU-... or MIG-...)", e)
}

func (inv *inventory) byIndex(e string, i int) (target, error) {
	if i >= 0 && i < inv.n {
		return inv.whole(i)
	}
	if err := inv.listMIG(); err != nil {
		return target{}, err
	}
	if k := i - inv.n; i >= inv.n && k < len(inv.migs) {
		return inv.migs[k], nil
	}
	if len(inv.migs) > 0 {
		return target{}, fmt.Errorf("NVML: device %q: no such GPU (NVML sees %d: 0-%d, and MIG instances %d-%d)",
			e, inv.n, inv.n-1, inv.n, inv.n+len(inv.migs)-1)
	}
	return target{}, fmt.Errorf("NVML: device %q: no such GPU (NVML sees %d: 0-%d)", e, inv.n, inv.n-1)
}

// byPrefix matches a whole GPU's UUID prefix, skipping GPUs that do not
// answer.
func (inv *inventory) byPrefix(prefix string) (target, error) {
	var found []target
	for i := range inv.n {
		t, err := inv.whole(i)
		if err == nil && strings.HasPrefix(t.uuid, prefix) {
			found = append(found, t)
		}
	}
	return unique(prefix, found, "GPU")
}

func (inv *inventory) byMIGUUID(e string) (target, error) {
	if err := inv.listMIG(); err != nil {
		return target{}, err
	}
	var found []target
	for _, m := range inv.migs {
		if m.uuid == e {
			return m, nil
		}
		if strings.HasPrefix(m.uuid, e) {
			found = append(found, m)
		}
	}
	return unique(e, found, "MIG instance")
}

// byLegacyMIG resolves MIG-GPU-<parent uuid>/<gi>/<ci>, the form drivers
// before R470 gave MIG instances.
func (inv *inventory) byLegacyMIG(e string) (target, error) {
	parts := strings.Split(strings.TrimPrefix(e, "MIG-"), "/")
	if len(parts) != 3 {
		return target{}, fmt.Errorf("NVML: device %q: want MIG-GPU-<uuid>/<gpu instance>/<compute instance>", e)
	}
	gi, err1 := strconv.Atoi(parts[1])
	ci, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		return target{}, fmt.Errorf("NVML: device %q: want MIG-GPU-<uuid>/<gpu instance>/<compute instance>", e)
	}
	if err := inv.listMIG(); err != nil {
		return target{}, err
	}
	for _, m := range inv.migs {
		if m.parent == parts[0] && m.gi == gi && m.ci == ci {
			return m, nil
		}
	}
	return target{}, fmt.Errorf("NVML: device %q: no MIG instance %d/%d on GPU %s", e, gi, ci, parts[0])
}

func unique(e string, found []target, what string) (target, error) {
	switch len(found) {
	case 0:
		return target{}, fmt.Errorf("NVML: device %q: no %s has this UUID", e, what)
	case 1:
		return found[0], nil
	}
	return target{}, fmt.Errorf("NVML: device %q: ambiguous, matches %s and %s", e, found[0].uuid, found[1].uuid)
}

// listMIG enumerates the MIG instances of every GPU with MIG enabled, as
// NVIDIA's go-nvlib does (VisitMigDevices): GetMaxMigDeviceCount, then
// GetMigDeviceHandleByIndex for each slot, skipping empty ones
// (ERROR_NOT_FOUND).
func (inv *inventory) listMIG() error {
	if inv.listed {
		return nil
	}
	inv.listed = true
	for i := range inv.n {
		h, ret := inv.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			continue // a GPU that does not answer has no instance to offer
		}
		if mode, _, ret := h.GetMigMode(); ret != gonvml.SUCCESS || mode != gonvml.DEVICE_MIG_ENABLE {
			continue
		}
		parent, ret := h.GetUUID()
		if ret != gonvml.SUCCESS {
			return fmt.Errorf("NVML: GPU %d: reading UUID: %w", i, ret)
		}
		max, ret := h.GetMaxMigDeviceCount()
		if ret != gonvml.SUCCESS {
			return fmt.Errorf("NVML: GPU %d: counting MIG instances: %w", i, ret)
		}
		for j := range max {
			m, ret := h.GetMigDeviceHandleByIndex(j)
			if ret == gonvml.ERROR_NOT_FOUND {
				continue
			}
			if ret != gonvml.SUCCESS {
				return fmt.Errorf("NVML: GPU %d: MIG instance %d: %w", i, j, ret)
			}
			uuid, ret := m.GetUUID()
			if ret != gonvml.SUCCESS {
				return fmt.Errorf("NVML: GPU %d: MIG instance %d: reading UUID: %w", i, j, ret)
			}
			t := target{h: m, index: inv.n + len(inv.migs), uuid: uuid, parent: parent, gi: -1, ci: -1}
			if gi, ret := m.GetGpuInstanceId(); ret == gonvml.SUCCESS {
				t.gi = gi
			}
			if ci, ret := m.GetComputeInstanceId(); ret == gonvml.SUCCESS {
				t.ci = ci
			}
			inv.migs = append(inv.migs, t)
		}
	}
	return nil
}
