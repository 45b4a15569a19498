package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
)

// faultWindow is how long after a critical Xid a child's exit is still
// blamed on the GPU, even once the GPU answers again: a process can take
// a while to die of a fault (a CUDA call fails, the server logs, cleans
// up and exits).
const faultWindow = 10 * time.Second

// gpuFaults is what the loop knows about GPU faults (Xid events).
type gpuFaults struct {
	// faulted holds, per UUID, the critical fault not yet followed by a
	// successful sample of that GPU.
	faulted map[string]gpu.Fault
	// last is the newest critical fault, for faultWindow.
	last *gpu.Fault
	// awaiting: a gpu_fault restart waits for the GPU to answer again.
	awaiting bool
	noted    bool // the wait was logged
}

// observe journals and counts one fault event; a critical one marks its
// GPU faulted. Nothing is done to the child: a fault that kills it shows
// as its exit, and an application Xid leaves it alone.
func (g *gpuFaults) observe(f gpu.Fault, j journal) {
	if f.Time.IsZero() {
		f.Time = time.Now()
	}
	meaning := gpu.XidMeaning(f.Xid)
	j.emit(api.Event{Event: api.EventGPUFault, GPU: f.UUID, GPUIndex: new(f.Index), Xid: int(f.Xid), Detail: meaning})
	j.logf("GPU %d (%s): %s", f.Index, f.UUID, meaning)
	if gpu.ClassifyXid(f.Xid) != gpu.XidCritical {
		return
	}
	if g.faulted == nil {
		g.faulted = map[string]gpu.Fault{}
	}
	g.faulted[f.UUID] = f
	g.last = &f
}

// answered clears the faulted mark of every GPU that s read after its
// fault: the GPU answers again.
func (g *gpuFaults) answered(s gpu.Sample, j journal) {
	for _, d := range s.Devices {
		if f, ok := g.faulted[d.UUID]; ok && s.Time.After(f.Time) {
			delete(g.faulted, d.UUID)
			j.logf("GPU %d (%s) answers again after Xid %d", d.Index, d.UUID, f.Xid)
		}
	}
}

// cause reports the fault the exit at now of a child started at
// started is blamed on: a watched GPU still faulted, or a critical fault
// within faultWindow that came while that child ran (a child started after
// the GPU answered again did not meet the fault).
func (g *gpuFaults) cause(now, started time.Time) (gpu.Fault, bool) {
	var cause *gpu.Fault
	for _, f := range g.faulted {
		if cause == nil || f.Time.After(cause.Time) {
			cause = &f
		}
	}
	if last := g.last; cause == nil && last != nil && now.Sub(last.Time) <= faultWindow && !last.Time.Before(started) {
		cause = g.last
	}
	if cause == nil {
		return gpu.Fault{}, false
	}
	return *cause, true
}

// await makes the next start wait for the GPU to answer again (a
// gpu_fault restart).
func (g *gpuFaults) await() { g.awaiting, g.noted = true, false }

// hold keeps a gpu_fault restart waiting while the sample r failed or a
// watched GPU is still faulted: without a GPU that answers there is
// nothing to start on.
func (g *gpuFaults) hold(r sampleResult, j journal) bool {
	if !g.awaiting {
		return false
	}
	if r.err == nil && len(g.faulted) == 0 {
		g.awaiting = false
		return false
	}
	if !g.noted {
		g.noted = true
		j.logf("waiting for the faulted GPU to answer again before restarting")
	}
	return true
}
