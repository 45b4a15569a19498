package supervisor

import (
	"slices"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// What the loop reads out of a probe's sample for the decision core and
// the tenants of a shared GPU.

// devices copies a sample's GPUs into the decision core's type.
func devices(devs []gpu.Device) []core.Device {
	return appendDevices(make([]core.Device, 0, len(devs)), devs)
}

// appendDevices appends devs, in the decision core's type, to out.
func appendDevices(out []core.Device, devs []gpu.Device) []core.Device {
	for _, d := range devs {
		out = append(out, core.Device{Index: d.Index, UUID: d.UUID, Name: d.Name, Used: d.Used, Total: d.Total})
	}
	return out
}

// appendProcesses appends procs, in the decision core's type, to out.
func appendProcesses(out []core.Process, procs []gpu.Process) []core.Process {
	for _, p := range procs {
		out = append(out, core.Process{PID: p.PID, Device: p.Device, Used: p.Used})
	}
	return out
}

// sameTree reports whether tree holds exactly the processes pids (a
// process on two GPUs is listed twice): then a sample's tree need not be
// made again.
func sameTree(tree map[int]bool, pids []int) bool {
	distinct := 0
	for i, pid := range pids {
		if !tree[pid] {
			return false
		}
		if !slices.Contains(pids[:i], pid) {
			distinct++
		}
	}
	return distinct == len(tree)
}

// reading copies a good sample into the decision core's type.
func reading(s gpu.Sample) *core.Reading {
	r := &core.Reading{Devices: devices(s.Devices), ProcessesAt: s.ProcessesAt}
	if len(s.Processes) > 0 {
		r.Processes = appendProcesses(make([]core.Process, 0, len(s.Processes)), s.Processes)
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

// worstGPU is the UUID of the GPU whose used/limit is highest: the one that
// crossed.
func worstGPU(devs []gpu.Device, pol *policy.Policy) string {
	best, worst := "", -1.0
	for _, d := range devs {
		if lim := pol.Limit(d.Total); lim > 0 {
			if r := float64(d.Used) / float64(lim); r > worst {
				best, worst = d.UUID, r
			}
		}
	}
	return best
}

// watchedUUIDs are the UUIDs of the watched GPUs devs.
func watchedUUIDs(devs []gpu.Device) []string {
	var out []string
	for _, d := range devs {
		if d.UUID != "" {
			out = append(out, d.UUID)
		}
	}
	return out
}

// startUsage is what the settle rule of a start watches: the child tree's
// own usage over the watched GPUs when the backend knows processes (own),
// else the devices' used memory; and the memory that is out of.
func startUsage(s gpu.Sample, tree map[int]bool) (used, total uint64, own bool) {
	for _, d := range s.Devices {
		total += d.Total
	}
	if s.ProcessesAt.IsZero() {
		for _, d := range s.Devices {
			used += d.Used
		}
		return used, total, false
	}
	return servedBy(s, tree), total, true
}

// startBaseline is the usage a new (or newly woken) child's start settles
// from: nothing of its own when the backend lists its processes, else the
// devices' used memory, which holds the other tenants' too.
func startBaseline(s gpu.Sample, tree map[int]bool) uint64 {
	used, _, own := startUsage(s, tree)
	if own {
		return 0
	}
	return used
}

// servedBy is what tree's processes use in s.
func servedBy(s gpu.Sample, tree map[int]bool) uint64 {
	var used uint64
	for _, p := range s.Processes {
		if tree[p.PID] {
			used += p.Used
		}
	}
	return used
}
