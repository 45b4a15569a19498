package core

import (
	"syscall"
	"time"
)

// Input is something that happened, for Decide.
type Input interface{ input() }

// Sample is a good reading of a running child (no stop, restart or
// action under way): its watermark ratio and what the trend says.
type Sample struct {
	Now   time.Time
	Ratio float64
	// Predicted: the trend projects critical within lead. Ran is how
	// long the child has run: a server's own start-up (weights, cache,
	// CUDA graphs) is growth toward its budget, not toward an OOM, so no
	// predicted step comes before it has run for grace, the time a step
	// is given to take effect.
	Predicted bool
	Ran       time.Duration
	ETA       float64 // seconds to critical on the trend, for the text
	// Shared: the tenants of the GPU decide together (a coordinated
	// instance): the rules' verdict is proposed to them (Propose) and taken
	// only when they choose this instance (Peer). Proposing: a proposal is
	// with them already; the sample waits for its outcome and moves no
	// timer.
	Shared, Proposing bool
	// PeerHeld: in observe mode, another tenant of the GPU stepped for
	// this pressure; the would-be step is a yield, noted elsewhere.
	PeerHeld bool
}

// Gap is a missing reading (a failed probe call): the rules cannot vouch
// for "above high since" or "below low since" any more.
type Gap struct{}

// NotTaken reports that the step last decided did not happen (its state
// file could not be written): the rules forget it, so the next sample
// tries again.
type NotTaken struct{}

// ManualStep is `gpuguard step up|down`.
type ManualStep struct {
	Now     time.Time
	Up      bool
	Running bool   // a child runs with no stop, restart or action under way
	Stopped bool   // asleep with the child stopped: a step up wakes it
	State   string // the instance's state, for the refusal
	// Reading is the newest good reading (nil: none, or the probe is
	// down) and Tree the child's processes in it, to judge the fit.
	Reading *Reading
	Tree    map[int]bool
}

// StopSignal is an operator's stop (a signal, or the run's context
// ending): forwarded to the child once, then stop_timeout before its
// group is killed; a second one kills at once.
type StopSignal struct {
	Sig      syscall.Signal
	Running  bool // a child runs
	Stopping bool // a stop is under way
	// Lost: the stop under way is gpuguard's own, for a lost GPU
	// (on_gpu_lost = "stop"); the operator's stop takes it over.
	Lost bool
	// Signalled is the stop signal gpuguard already sent the child (for
	// a step, a sleep or a lost GPU), waiting for its exit; 0: none. The
	// same signal is not sent again: the child has it once, and a second
	// one is what many servers (llama-server, uvicorn) take as "quit
	// now", aborting mid-cleanup.
	Signalled syscall.Signal
}

// StopWaitOver is the stop_timeout timer: the child did not exit.
type StopWaitOver struct{ Running bool }

// BackoffOver is the backoff timer: the next start may go ahead, aiming
// at Target, for Why (the Relaunch's).
type BackoffOver struct {
	Target int
	Why    Reason
}

// Begin is the run's beginning, before any sample.
type Begin struct{}

// Unstartable is a start that failed before the child ran: its command
// could not be expanded (Expand: a configuration error), or the launcher
// could not run it (Err names the command).
type Unstartable struct {
	Err    error
	Expand bool
}

func (Sample) input()       {}
func (Gap) input()          {}
func (NotTaken) input()     {}
func (ManualStep) input()   {}
func (StopSignal) input()   {}
func (StopWaitOver) input() {}
func (BackoffOver) input()  {}
func (Begin) input()        {}
func (Unstartable) input()  {}
