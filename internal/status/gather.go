package status

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/offcall"
	"github.com/gpuguard/gpuguard/internal/safetext"
	"github.com/gpuguard/gpuguard/internal/status/view"
)

// ProbeTimeout is how long status waits for one backend call (an opening,
// a reading) before it answers without it.
const ProbeTimeout = 2 * time.Second

// Options is what a Gatherer reads.
type Options struct {
	Name    string        // "" = every instance
	Dirs    []string      // the runtime dirs to look for sockets in
	Timeout time.Duration // bounds each instance's answer
	// Backend names the backend that Open opens, for its warnings.
	Backend string
	// Open opens the command's own backend, used only when no instance
	// answers; it runs off the caller's goroutine and may never return.
	Open func() (gpu.Probe, error)
	// ErrOut gets the warnings (each once) and the sweeps' notices.
	ErrOut io.Writer
}

// Gatherer collects one report per call; across --watch refreshes it
// keeps the GPU backend open and prints each warning once.
type Gatherer struct {
	o        Options
	probe    gpu.Probe
	probeErr error                             // opening failed: not retried
	opening  <-chan offcall.Result[gpu.Probe]  // an opening still under way at its time limit
	reading  <-chan offcall.Result[gpu.Sample] // a reading abandoned at its timeout, until it ends
	warned   map[string]bool
}

// New returns a Gatherer; Close it when done.
func New(o Options) *Gatherer {
	return &Gatherer{o: o, warned: map[string]bool{}}
}

// NoSuchInstance is Gather's error for a Name with no socket.
type NoSuchInstance struct{ Name, Dirs string }

func (e *NoSuchInstance) Error() string {
	return fmt.Sprintf("no such instance %q (no socket in %s)", e.Name, e.Dirs)
}

// Gather is one report: the instances' answers (a named instance only),
// and the GPUs from their answers, or from the backend when none answers.
func (g *Gatherer) Gather(ctx context.Context) (view.Report, error) {
	r := view.Report{Instances: []api.Status{}, GPUs: []api.GPU{}}
	ins, err := control.Discover(g.o.Dirs)
	if err != nil {
		g.warn(err.Error())
	}
	if g.o.Name != "" {
		ins = slices.DeleteFunc(ins, func(in control.Instance) bool { return in.Name != g.o.Name })
		if len(ins) == 0 {
			return r, &NoSuchInstance{g.o.Name, strings.Join(g.o.Dirs, ", ")}
		}
		ins = ins[:1] // as root, the user's own dir comes before /run/gpuguard
	}
	r.Instances = control.QueryAll(ctx, ins, g.o.Timeout)
	r.Instances = g.sweep(ins, r.Instances)
	r.GPUs = view.UnionGPUs(r.Instances)
	answered := slices.ContainsFunc(r.Instances, func(st api.Status) bool { return st.State != api.StateUnreachable })
	if !answered && g.o.Name == "" {
		r.GPUs = g.probeGPUs(ctx)
	}
	r.GPUs = view.WithTenants(r.GPUs, r.Instances)
	describeProcesses(ctx, r.GPUs)
	return r, nil
}

// sweep removes the sockets of unreachable instances that are gone (their
// lock is free) and drops them from sts, ins' answers in order; a named
// instance stays, to be reported as not running.
func (g *Gatherer) sweep(ins []control.Instance, sts []api.Status) []api.Status {
	out := sts[:0]
	for i, st := range sts {
		if st.State == api.StateUnreachable {
			swept, err := control.SweepStale(ins[i])
			if err != nil {
				g.warn(err.Error())
			}
			if swept && g.o.Name == "" {
				fmt.Fprintf(g.o.ErrOut, "gpuguard: removed the stale socket %s: instance %q is not running\n", safetext.Escape(ins[i].Socket), ins[i].Name)
				continue
			}
		}
		out = append(out, st)
	}
	return out
}

func (g *Gatherer) warn(msg string) {
	if !g.warned[msg] {
		g.warned[msg] = true
		fmt.Fprintf(g.o.ErrOut, "gpuguard: warning: %s\n", safetext.Escape(msg))
	}
}
