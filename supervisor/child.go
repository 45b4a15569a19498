package supervisor

import (
	"fmt"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// history is what the loop remembers of the children so far: how many it
// launched and restarted, and how the last one ended. The child's
// environment (GPUGUARD_RESTARTS, GPUGUARD_LAST_EXIT), every start event
// and every fit judgement say it.
type history struct {
	starts   int // children launched so far
	restarts int
	lastExit string // none | oom | crash | watermark | reload | gpu_fault
}

// launchWhat names the coming launch, made for why, for people: "start"
// for the run's first, else "restart after " its reason (the exit it
// follows, or the step gpuguard took: crash, request, ...; a `gpuguard
// step` is "manual step"), or "start after request" for a first launch
// made for a step (a run that began asleep).
func (h history) launchWhat(why core.Reason) string {
	if why == "" { // a launch whose decision gave no reason: the last exit's
		why = core.Reason(h.lastExit)
	}
	word := string(why)
	if why == core.Manual {
		word = "manual step"
	}
	switch {
	case why == core.FirstStart:
		return "start"
	case h.starts == 0:
		return "start after " + word
	}
	return "restart after " + word
}

// childRun is the child that runs now (child nil: none).
type childRun struct {
	child      Child
	childStart time.Time
	childTree  map[int]bool // the child's processes at the last sample
	// notifiedAt is when the current child was last sent the notify
	// signal (zero: never), and notifiedSig which one (a reload may change
	// [notify] signal since), to tell its death by that signal.
	notifiedAt  time.Time
	notifiedSig syscall.Signal
}

// childDone is the running child's end, or nil (a select on it blocks)
// when none runs.
func (c *childRun) childDone() <-chan struct{} {
	if c.child == nil {
		return nil
	}
	return c.child.Done()
}

// latest is the newest good reading and its watermark ratio, kept for
// what reads them between samples (status, admission, the front door, a
// manual step's fit); the decisions take them as arguments (core inputs).
type latest struct {
	haveSample bool
	lastSample gpu.Sample
	ratio      float64
	// served is what the child's processes used at the newest sample while
	// it served (0: not known), the needs of a wake into a serving profile
	// that states none (core.WakeFit).
	served uint64
	// devs and procs are the newest sample's GPUs and (in process scope)
	// processes in the decision core's type, for the watermark; their
	// storage serves every sample.
	devs  []core.Device
	procs []core.Process
}

// notify sends sig ([notify] signal) to the child's main process after
// a live change, but only when the process catches or ignores it: until a server
// installs its handler (while it imports its framework, say) the default
// action would end it. Otherwise, or when that cannot be told, the signal
// is skipped and journaled; the child finds the change in the state file
// when it starts listening.
func (c *childRun) notify(sig syscall.Signal, st api.ProfileState, j journal) {
	if sig == 0 || c.child == nil {
		return
	}
	if sc, ok := c.child.(SignalChecker); ok {
		if caught, err := sc.Catches(sig); err != nil || !caught {
			why := "it has no handler for it yet"
			if err != nil {
				why = fmt.Sprintf("whether it has a handler is unknown (%v)", err)
			}
			detail := fmt.Sprintf("%s not sent to the child (pid %d): %s; it finds profile %s in the state file (seq %d)",
				policy.SignalName(sig), c.child.PID(), why, st.Profile, st.Seq)
			j.Emit(api.Event{Event: api.EventNotifySkipped, PID: c.child.PID(), Detail: detail})
			j.Logf("%s", detail)
			return
		}
	}
	if err := c.child.Signal(sig); err == nil {
		c.notifiedAt, c.notifiedSig = time.Now(), sig
	}
}
