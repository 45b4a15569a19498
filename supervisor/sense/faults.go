package sense

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
)

// FaultWindow is how long after a critical Xid a child's exit is still
// blamed on the GPU, even once the GPU answers again: a process can take
// a while to die of a fault (a CUDA call fails, the server logs, cleans
// up and exits).
const FaultWindow = 10 * time.Second

// Faults is what the supervisor knows about GPU faults (Xid events).
type Faults struct {
	// faulted holds, per UUID, the critical fault not yet followed by a
	// successful sample of that GPU.
	faulted map[string]gpu.Fault
	// last is the newest critical fault, for FaultWindow.
	last *gpu.Fault
}

// Observe journals and counts one fault event; a critical one marks its
// GPU faulted. Nothing is done to the child: a fault that kills it shows
// as its exit, and an application Xid leaves it alone.
func (g *Faults) Observe(f gpu.Fault, j Journal) {
	if f.Time.IsZero() {
		f.Time = time.Now()
	}
	meaning := gpu.XidMeaning(f.Xid)
	j.Emit(api.Event{Event: api.EventGPUFault, GPU: f.UUID, GPUIndex: new(f.Index), Xid: int(f.Xid), Detail: meaning})
	j.Logf("GPU %d (%s): %s", f.Index, f.UUID, meaning)
	if gpu.ClassifyXid(f.Xid) != gpu.XidCritical {
		return
	}
	if g.faulted == nil {
		g.faulted = map[string]gpu.Fault{}
	}
	g.faulted[f.UUID] = f
	g.last = &f
}

// Answered clears the faulted mark of every GPU that s read after its
// fault: the GPU answers again.
func (g *Faults) Answered(s gpu.Sample, j Journal) {
	for _, d := range s.Devices {
		if f, ok := g.faulted[d.UUID]; ok && s.Time.After(f.Time) {
			delete(g.faulted, d.UUID)
			j.Logf("GPU %d (%s) answers again after Xid %d", d.Index, d.UUID, f.Xid)
		}
	}
}

// Cause reports the fault the exit at now of a child started at
// started is blamed on: a watched GPU still faulted, or a critical fault
// within FaultWindow that came while that child ran (a child started after
// the GPU answered again did not meet the fault).
func (g *Faults) Cause(now, started time.Time) (gpu.Fault, bool) {
	var cause *gpu.Fault
	for _, f := range g.faulted {
		if cause == nil || f.Time.After(cause.Time) {
			cause = &f
		}
	}
	if last := g.last; cause == nil && last != nil && now.Sub(last.Time) <= FaultWindow && !last.Time.Before(started) {
		cause = g.last
	}
	if cause == nil {
		return gpu.Fault{}, false
	}
	return *cause, true
}

// Any reports whether a watched GPU is still faulted: a critical fault
// not followed by a reading of it. A gpu_fault restart waits while it is
// (core.Start).
func (g *Faults) Any() bool { return len(g.faulted) > 0 }
