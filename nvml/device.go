//go:build cgo

package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// notAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long: a
// process's usage the driver cannot tell (WDDM, some containers).
const notAvailable = ^uint64(0)

// device is one watched GPU or MIG instance and what the probe learnt
// about it. A MIG instance is read on its own handle: memory and
// processes there are the instance's.
type device struct {
	h      gonvml.Device
	index  int
	uuid   string
	name   string
	parent string // the whole GPU's UUID
	gi, ci int    // MIG instance ids, -1 for a whole GPU

	memV1   bool // nvmlDeviceGetMemoryInfo_v2 is missing or not supported
	noProcs bool // the process query is not supported on this GPU
	lost    bool // the last query said the GPU is lost: look it up again
}

func newDevice(t target, v1 bool) (*device, error) {
	name, ret := t.h.GetName()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("NVML: GPU %d (%s): reading its name: %w", t.index, t.uuid, ret)
	}
	return &device{h: t.h, index: t.index, uuid: t.uuid, name: name, parent: t.parent,
		gi: t.gi, ci: t.ci, memV1: v1}, nil
}

// isLost reports the answers that mean the GPU itself is gone (fell off
// the bus, needs a reset) rather than that one query failed.
func isLost(ret gonvml.Return) bool {
	switch ret {
	case gonvml.ERROR_GPU_IS_LOST, gonvml.ERROR_UNKNOWN, gonvml.ERROR_NOT_FOUND,
		gonvml.ERROR_GPU_NOT_FOUND, gonvml.ERROR_RESET_REQUIRED:
		return true
	}
	return false
}

// fail turns a failed query into an error, marking the device lost when
// the answer says so.
func (d *device) fail(what string, ret gonvml.Return) error {
	if isLost(ret) {
		d.lost = true
		return fmt.Errorf("NVML: GPU %d (%s): %s: %w: %w", d.index, d.uuid, what, gpu.ErrGPULost, ret)
	}
	return fmt.Errorf("NVML: GPU %d (%s): %s: %w", d.index, d.uuid, what, ret)
}

// relocate looks a lost GPU up again by UUID: after a reset its handle may
// have changed. It fails, wrapping gpu.ErrGPULost, while the GPU is gone.
func (d *device) relocate(lib Library) error {
	h, ret := lib.DeviceGetHandleByUUID(d.uuid)
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("NVML: GPU %d (%s): still lost: %w: %w", d.index, d.uuid, gpu.ErrGPULost, ret)
	}
	d.h, d.lost = h, false
	return nil
}

// memory reads used and total bytes. Used counts the driver's reserved
// memory too (v2's Used + Reserved, which is v1's Used): what the model
// server can still allocate is Total - Used either way.
func (d *device) memory() (used, total uint64, err error) {
	if !d.memV1 {
		m, ret := d.h.GetMemoryInfo_v2()
		switch {
		case ret == gonvml.SUCCESS:
			return m.Used + m.Reserved, m.Total, nil
		case ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_FUNCTION_NOT_FOUND ||
			ret == gonvml.ERROR_ARGUMENT_VERSION_MISMATCH:
			d.memV1 = true // remembered: v1 from now on
		default:
			return 0, 0, d.fail("reading memory", ret)
		}
	}
	m, ret := d.h.GetMemoryInfo()
	if ret != gonvml.SUCCESS {
		return 0, 0, d.fail("reading memory", ret)
	}
	return m.Used, m.Total, nil
}

// processes appends the compute processes on the GPU. ok is false when the
// GPU does not support the query (remembered).
func (d *device) processes(out []gpu.Process) (_ []gpu.Process, ok bool, err error) {
	if d.noProcs {
		return out, false, nil
	}
	infos, ret := d.h.GetComputeRunningProcesses()
	switch ret {
	case gonvml.SUCCESS:
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_NO_PERMISSION:
		d.noProcs = true
		return out, false, nil
	default:
		return out, false, d.fail("listing processes", ret)
	}
	for _, pi := range infos {
		used := pi.UsedGpuMemory
		if used == notAvailable {
			used = 0
		}
		out = append(out, gpu.Process{PID: int(pi.Pid), Device: d.index, Used: used})
	}
	return out, true, nil
}
