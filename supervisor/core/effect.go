package core

import (
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Effect is something the loop must do, in the order Decide returns them.
type Effect interface{ effect() }

// Step moves the child from the level to To. A live profile changes in
// place (state file, notify signal, event, in that order, and nothing at
// all when the state file cannot be written: then the loop feeds
// NotTaken); any other is a graceful restart into it. Restart: a
// critical restart, always by To's non-live form whatever its live says:
// a restart, or stopping the child when To serves nothing.
type Step struct {
	Now     time.Time
	To      int
	Reason  Reason
	Why     string
	Event   string // api.EventStepDown or api.EventStepUp
	Restart bool
	// Manual: the reply to the request goes with the step (and a restart
	// first checks that the state file can be written).
	Manual bool
	// Wake: a live wake for a held request; the loop reports how it went
	// (Woke).
	Wake bool
	// For: a sleep to make room for that tenant (reason room).
	For string
}

// Journal hands an event to the observers (the loop fills in the name
// and the profile).
type Journal struct{ Event api.Event }

// Log prints one line for people.
type Log struct{ Text string }

// Reply answers the request being decided; Err nil means done.
type Reply struct{ Err error }

// NoteFit journals and prints a fit judgement for a start for Why, and
// keeps it for status.
type NoteFit struct {
	Fit     Fit
	Outcome string
	Why     Reason
}

// Launch starts the child in Level, telling Fit (Outcome says how) and
// Why: the first start, the exit restarted after, or the step's reason.
type Launch struct {
	Level   int
	Fit     Fit
	Outcome string
	Why     Reason
}

// Wait keeps waiting for memory: no profile fits Free (the devices'
// usage, for people) for the start for Why.
type Wait struct {
	Fit  Fit
	Free string
	Why  Reason
}

// Ending is how a run ends.
type Ending int

// The endings.
const (
	EndOK      Ending = iota // exit 0
	EndStatus                // the child's status
	EndNoFit                 // exit 75
	EndFailure               // exit 1: gpuguard failed (the child could not start, the GPU is lost)
	EndSignal                // 128 + Status: stopped by signal Status with no child running
	EndConfig                // exit 78: the command could not be expanded
)

// Finish ends the run in State (api.StateExited or StateFatal).
type Finish struct {
	State  string
	End    Ending
	Status int
	Err    error
}

// Restart counts a failed child's restart and journals it: Kind says why
// (oom, crash), To is the next start's level.
type Restart struct {
	Kind     ExitKind
	To       int
	Evidence string
	Status   int
}

// Relaunch starts the next child in Level, for Why, once Delay has
// passed (0: at once) and the dead child's memory is freed.
type Relaunch struct {
	Delay time.Duration
	Level int
	Why   Reason
}

// BeginStop marks a stop under way with Sig (the state is Stopping).
// TakeOver: the operator's stop takes over gpuguard's own (a lost GPU's),
// and the exit will be the child's.
type BeginStop struct {
	Sig      syscall.Signal
	TakeOver bool
}

// AnnounceStop tells the service manager (STOPPING=1, once) and fails
// the replies of a restart under way.
type AnnounceStop struct{}

// StopChild stops the child gracefully with Sig (through the front door's
// drain when there is one), then stop_timeout before Kill.
type StopChild struct{ Sig syscall.Signal }

// Kill kills the child's process group now.
type Kill struct{}

// SampleNow asks for a sample at once, not a period away.
type SampleNow struct{}

// Released ends the wait for the dead child's memory: the next start no
// longer waits for its processes.
type Released struct{}

// WakeStopped leaves a sleep with the child stopped for To (above the
// level): into another serving = false profile by the state file alone,
// else by starting the child again once To fits. Manual: the reply to the
// request goes with it.
type WakeStopped struct {
	To     int
	Reason Reason
	Why    string
	Manual bool
}

func (SampleNow) effect()    {}
func (Released) effect()     {}
func (WakeStopped) effect()  {}
func (BeginStop) effect()    {}
func (AnnounceStop) effect() {}
func (StopChild) effect()    {}
func (Kill) effect()         {}
func (Step) effect()         {}
func (Journal) effect()      {}
func (Log) effect()          {}
func (Reply) effect()        {}
func (NoteFit) effect()      {}
func (Launch) effect()       {}
func (Wait) effect()         {}
func (Finish) effect()       {}
func (Restart) effect()      {}
func (Relaunch) effect()     {}
