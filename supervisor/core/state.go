package core

import (
	"errors"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// ErrNoFit is the error a run ends with (wrapped, exit 75) when no
// profile's needs fit: the free memory under when_full = "exit", or the
// GPUs' whole memory (no profile can ever fit, whatever when_full says).
var ErrNoFit = errors.New("no profile fits")

// State is what the core decides from. Policy, Level and Observe are the
// loop's (a reload replaces the policy; launches, steps and sleeps move
// the level), set before each input; the rules' timers and the restart
// budget are the core's own.
type State struct {
	Policy  *policy.Policy
	Level   int  // the profile the child runs in, or the next start aims at
	Observe bool // observe mode: steps are journaled, never taken

	Rules  Rules
	Budget Budget
	Starts Starts
	// undo is the rules before the step last decided, until the loop
	// reports it NotTaken (a live change whose state file failed).
	undo *Rules
}

// Input is something that happened, for Decide.
type Input interface{ input() }

// Sample is a good reading of a running child (no stop, restart or
// action under way): its watermark ratio and what the trend says.
type Sample struct {
	Now       time.Time
	Ratio     float64
	Predicted bool    // the trend projects critical within lead (and grace has passed since the start)
	ETA       float64 // seconds to critical on the trend, for the text
	// PeerHeld: in observe mode, another tenant of the GPU stepped for
	// this pressure; the would-be step is a yield, noted elsewhere.
	PeerHeld bool
}

// Gap is a missing reading (a failed probe call): the rules cannot vouch
// for "above high since" or "below low since" any more.
type Gap struct{}

// Launched is a new child: the rules start afresh.
type Launched struct{}

// Peer is a coordinated instance's verdict that this instance steps:
// the tenants of a shared GPU chose it (Reason and Why say for what).
type Peer struct {
	Now    time.Time
	Reason Reason
	Why    string
	Ratio  float64
}

// NotTaken reports that the step last decided did not happen (its state
// file could not be written): the rules forget it, so the next sample
// tries again.
type NotTaken struct{}

// ManualStep is `gpuguard step up|down`.
type ManualStep struct {
	Now     time.Time
	Up      bool
	Running bool   // a child runs with no stop, restart or action under way
	State   string // the instance's state, for the refusal
	// Reading is the newest good reading (nil: none, or the probe is
	// down) and Tree the child's processes in it, to judge the fit.
	Reading *Reading
	Tree    map[int]bool
}

// Exited is a child's exit, with what gpuguard had under way when it
// came, which explains it first, in this order: a stop (Stopping; Lost
// when it was gpuguard's own, for a lost GPU), a plan (a sleep, a restart
// gpuguard asked for), the instance asleep in a serving = false profile,
// the notify signal's doing (NotifySig sent at Notified, zero: never) and
// a GPU fault. An exit none of them explains is OOM, crash or clean, by
// its status and output.
type Exited struct {
	Now  time.Time
	Exit Exit
	Ran  time.Duration
	Told string // an OOM the child reported on the control socket
	// Ready: the child said it was ready, or the front door saw it
	// answer its health check (the start rule, Starts).
	Ready bool

	Stopping  bool
	Lost      error
	Plan      *Plan
	Notified  time.Time
	NotifySig syscall.Signal
	Fault     *Fault
}

// NoFitEver is a waiting start's reading, checked first: a ladder that
// cannot fit the GPUs even empty ends the run.
type NoFitEver struct {
	Devices []Device
	Target  int
}

// Start is a waiting start's reading once the release and claim waits
// are over: pick the profile, or apply when_full.
type Start struct {
	Devices []Device
	Target  int
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
}

// StopWaitOver is the stop_timeout timer: the child did not exit.
type StopWaitOver struct{ Running bool }

// BackoffOver is the backoff timer: the next start may go ahead, aiming
// at Target.
type BackoffOver struct{ Target int }

func (Sample) input()       {}
func (StopSignal) input()   {}
func (StopWaitOver) input() {}
func (BackoffOver) input()  {}
func (Gap) input()          {}
func (Launched) input()     {}
func (Peer) input()         {}
func (NotTaken) input()     {}
func (ManualStep) input()   {}
func (Exited) input()       {}
func (NoFitEver) input()    {}
func (Start) input()        {}
