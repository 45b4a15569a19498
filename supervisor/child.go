package supervisor

import (
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
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

// startReason is why the coming start happens: "start" for the first,
// else what ended the last child (oom, crash, watermark, ...).
func (h history) startReason() string {
	if h.starts == 0 && h.lastExit == "none" {
		return "start"
	}
	return h.lastExit
}

// startWhat names the coming start for people.
func (h history) startWhat() string {
	if r := h.startReason(); r != "start" {
		return "restart after " + r
	}
	return "start"
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

// childLife is the child's lifecycle: the children so far, the one that
// runs, a stop under way, the wait before the next start, and how Run
// ends. Each part is a type of its own; the loop embeds them together.
type childLife struct {
	history
	childRun
	stopRun
	startWait
	ending
}

// latest is the newest good reading and its watermark ratio, kept for
// what reads them between samples (status, admission, the front door, a
// manual step's fit); the decisions take them as arguments (core inputs).
type latest struct {
	haveSample bool
	lastSample gpu.Sample
	ratio      float64
}
