package supervisor

import (
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// devices copies a sample's GPUs into the decision core's type.
func devices(devs []gpu.Device) []core.Device {
	out := make([]core.Device, len(devs))
	for i, d := range devs {
		out[i] = core.Device{Index: d.Index, UUID: d.UUID, Name: d.Name, Used: d.Used, Total: d.Total}
	}
	return out
}

// reading copies a good sample into the decision core's type.
func reading(s gpu.Sample) *core.Reading {
	r := &core.Reading{Devices: devices(s.Devices), ProcessesAt: s.ProcessesAt}
	if len(s.Processes) > 0 {
		r.Processes = make([]core.Process, len(s.Processes))
		for i, p := range s.Processes {
			r.Processes[i] = core.Process{PID: p.PID, Device: p.Device, Used: p.Used}
		}
	}
	return r
}

// anyAlive reports whether any of pids still holds GPU memory in s.
func anyAlive(s gpu.Sample, pids map[int]bool) bool {
	for _, p := range s.Processes {
		if pids[p.PID] {
			return true
		}
	}
	return false
}
