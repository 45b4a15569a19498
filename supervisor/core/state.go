package core

import (
	"errors"

	"github.com/gpuguard/gpuguard/policy"
)

// ErrNoFit is the error a run ends with (wrapped, exit 75) when no
// profile's needs fit: the free memory under when_full = "exit", or the
// GPUs' whole memory (no profile can ever fit, whatever when_full says).
var ErrNoFit = errors.New("no profile fits")

// State is what the core remembers between inputs: the watermark rules'
// timers, the restart budget, the one start at a time, a held request's
// wish to wake, a gpu_fault restart's wait and a live change's effect
// still to be measured. Its fields are the core's
// alone: the loop changes it only through Decide, and reads it through
// its methods (StepPending).
type State struct {
	rules  Rules
	budget Budget
	starts Starts
	// undo is the rules before the step last decided, until the loop
	// reports it NotTaken (a live change whose state file failed).
	undo  *Rules
	claim claim
	// room: a start or a wake that does not fit, waiting for its GPU's
	// idle peers to sleep (room.go).
	room roomWait
	// wake: a held request asked for a wake not yet begun.
	wake bool
	// faultWait: a gpu_fault restart waits for the GPU to answer again;
	// faultNoted: that wait was logged.
	faultWait, faultNoted bool
	// measure: a live change through actions whose effect is to be
	// measured (measure.go); nil when none.
	measure *measuring
}

// Given is what the loop holds and the core decides by, handed in with
// each input: the policy in force (a reload replaces it), the level the
// child runs in or the next start aims at (launches, steps and sleeps
// move it), and observe mode.
type Given struct {
	Policy  *policy.Policy
	Level   int
	Observe bool
}

// StepPending reports whether a step down is on its way (Rules.StepPending):
// admission refuses GPU leases meanwhile, and the front door is told that
// memory is short.
func (st State) StepPending() bool { return st.rules.StepPending() }

// Waking reports whether a held request's wake is wanted and not yet
// begun: every sample is then a chance for it (Wake).
func (st State) Waking() bool { return st.wake }
