package supervisor

import (
	"slices"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// What the loop publishes after every event (publishSnapshot) is mostly
// what it published the time before: on a calm GPU every sample shows the
// same. The functions here make each part of the status object and the
// tenant record from the part published before, which they hand back
// as it is when nothing in it changed, and tell whether a whole record
// changed; a calm sample then allocates nothing and stores nothing.

// sameStatus reports whether a and b show the same. Events are compared
// by identity: each one the loop makes is new.
func sameStatus(a, b *api.Status) bool {
	return a.Name == b.Name && a.PID == b.PID && a.ChildPID == b.ChildPID && a.State == b.State &&
		a.Profile == b.Profile && a.Level == b.Level && a.Levels == b.Levels && a.Priority == b.Priority &&
		a.Watermark == b.Watermark && a.IntervalSeconds == b.IntervalSeconds && sameValue(a.ETASeconds, b.ETASeconds) &&
		a.Restarts == b.Restarts && a.UptimeSeconds == b.UptimeSeconds && a.ChildUptimeSeconds == b.ChildUptimeSeconds &&
		a.Observe == b.Observe && slices.EqualFunc(a.GPUs, b.GPUs, sameGPU) && a.Leases == b.Leases &&
		a.Ready == b.Ready && a.Held == b.Held && a.Tasks == b.Tasks && a.InFlight == b.InFlight &&
		sameValue(a.IdleSeconds, b.IdleSeconds) && sameValue(a.RoomFor, b.RoomFor) && a.LastEvent == b.LastEvent &&
		a.Fit == b.Fit && a.Serve == b.Serve && slices.Equal(a.Models, b.Models) && a.SimDir == b.SimDir && a.Error == b.Error
}

// sameGPU reports whether a and b show the same GPU.
func sameGPU(a, b api.GPU) bool {
	return a.Index == b.Index && a.UUID == b.UUID && a.Name == b.Name && a.UsedBytes == b.UsedBytes &&
		a.TotalBytes == b.TotalBytes && slices.Equal(a.Processes, b.Processes) && slices.Equal(a.Tenants, b.Tenants)
}

// sameTenant reports whether a and b are the same tenant record.
func sameTenant(a, b *api.TenantInfo) bool {
	return a.Name == b.Name && a.PID == b.PID && a.Priority == b.Priority && a.Scope == b.Scope &&
		a.Observe == b.Observe && a.State == b.State && a.Level == b.Level && a.Levels == b.Levels &&
		slices.Equal(a.GPUs, b.GPUs) && a.Starting == b.Starting && a.LeasesBytes == b.LeasesBytes &&
		a.GraceSeconds == b.GraceSeconds && a.SettleSeconds == b.SettleSeconds && sameValue(a.Room, b.Room)
}

// sameValue reports whether a and b are both nil, or point to equal values.
func sameValue[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// shownGPUs is the status object's gpus for sample s: was when it shows
// s already, else made anew (statusGPUs).
func shownGPUs(was []api.GPU, s gpu.Sample) []api.GPU {
	if len(was) != len(s.Devices) {
		return statusGPUs(s)
	}
	for i, d := range s.Devices {
		g := &was[i]
		if g.Index != d.Index || g.UUID != d.UUID || g.Name != d.Name || g.UsedBytes != d.Used ||
			g.TotalBytes != d.Total || g.Tenants != nil {
			return statusGPUs(s)
		}
		n := 0
		for _, p := range s.Processes {
			if p.Device != d.Index {
				continue
			}
			if n == len(g.Processes) || g.Processes[n] != (api.GPUProcess{PID: p.PID, UsedBytes: p.Used}) {
				return statusGPUs(s)
			}
			n++
		}
		if n != len(g.Processes) {
			return statusGPUs(s)
		}
	}
	return was
}

// shownModels is the status object's models: was when it names them
// already (ModelNames makes a slice for an instance that names none).
func shownModels(was []string, sv policy.Serve, instance string) []string {
	if len(sv.Models) == 0 && len(was) == 1 && was[0] == instance {
		return was
	}
	return sv.ModelNames(instance)
}

// shownName is a pointer to name (nil for ""): was when it points to
// name already.
func shownName(was *string, name string) *string {
	switch {
	case name == "":
		return nil
	case was != nil && *was == name:
		return was
	}
	n := name // a copy, so that name itself stays off the heap
	return &n
}
