package core

import (
	"fmt"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

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

	Stopping  bool
	Lost      error
	Plan      *Plan
	Notified  time.Time
	NotifySig syscall.Signal
	Fault     *Fault
}

// NotifyDeathWindow is how long after gpuguard sent the notify signal a
// child's death by that signal is taken to be the notification's doing
// (the child changed its handler between the check and the signal). The
// default action ends a process as soon as the signal is delivered, so
// the death is immediate; the exit is seen after the child's output is
// drained (at most a second later). The rest of the window is margin.
const NotifyDeathWindow = 5 * time.Second

// Plan is a restart or a sleep gpuguard itself began (a step into a
// profile with live = false, a critical restart, a manual step, a
// reload that removed the profile, a sleep by stopping the child), as an
// exit sees it.
type Plan struct {
	Level  int
	From   string // the profile the stopped child ran in
	Reload bool   // a reload removed the child's profile
	Sleep  bool   // no restart: the instance sleeps in Level
	Reason Reason // why gpuguard began it: the step's reason (watermark, critical, manual, request, reload, ...)
}

// Fault is the GPU fault a child's exit is blamed on, as the journal
// tells it.
type Fault struct {
	Index   int
	UUID    string
	Meaning string // what the Xid means, for people
}

// Lost is on_gpu_lost = "stop"'s verdict: no reading for lost_after.
// Running: a child runs; Restarting: a restart gpuguard asked for is
// under way, so its stop signal is already on its way.
type Lost struct {
	Err        error
	Running    bool
	Restarting bool
}

// Requested restarts a child that gpuguard ended itself (a restart it
// asked for, or its notification) at once and outside the crash budget:
// counted, journaled from From to Level with GPUGUARD_LAST_EXIT = Kind,
// then started in Level, for Why, once the dead child's memory is freed.
type Requested struct {
	Level  int
	From   string
	Kind   ExitKind
	Status int
	Detail string
	Why    Reason
}

// FellAsleep: the child stopped to sleep is gone; the instance sleeps in
// the plan's profile with no child.
type FellAsleep struct{}

// StayAsleep: the child ended on its own while the instance is in a
// serving = false profile; it is not restarted there (Why is the state
// file's reason).
type StayAsleep struct{ Why string }

func (Exited) input()      {}
func (Lost) input()        {}
func (Requested) effect()  {}
func (FellAsleep) effect() {}
func (StayAsleep) effect() {}

// exited ends a start under way on a shared GPU (the exit line says why,
// not "start complete") and routes the child's exit (route).
func (st State) exited(g Given, in Exited) (State, []Effect) {
	end := st.claim.end("")
	st, effs := st.route(g, in)
	return st, append(end, effs...)
}

// route routes a child's exit: what gpuguard had under way explains it
// first (a stop, a sleep, a restart it asked for), then the instance
// asleep, the notify signal's doing and a GPU fault; only an exit none of
// them explains meets the restart rules (failed).
func (st State) route(g Given, in Exited) (State, []Effect) {
	pol, e := g.Policy, in.Exit
	switch {
	case in.Stopping && in.Lost != nil:
		return st, []Effect{Finish{State: api.StateFatal, End: EndFailure, Err: in.Lost}}
	case in.Stopping:
		return st, []Effect{Finish{State: api.StateExited, End: EndStatus, Status: e.Status()}}
	case in.Plan != nil && in.Plan.Sleep:
		return st, []Effect{FellAsleep{}}
	case in.Plan != nil:
		kind := ExitRequested
		if in.Plan.Reload {
			kind = ExitReload
		}
		return st, []Effect{Requested{Level: in.Plan.Level, From: in.Plan.From, Kind: kind, Status: e.Status(), Why: in.Plan.Reason}}
	}
	notifyDeath := DiedOfNotify(e, in.NotifySig, in.Notified, in.Now, NotifyDeathWindow)
	name := pol.Profiles[g.Level].Name
	if !pol.Profiles[g.Level].Serving() {
		// A live sleep's child (a crash, an OOM, a GPU fault, its death by
		// the notify signal) would serve against the profile if restarted
		// there; an exit that ends the run anyway ends it as always.
		if kind, _ := ClassifyExit(e, pol.OOM, in.Told); notifyDeath || kind != ExitClean && (kind != ExitCrash || pol.Restart.OnCrash) {
			return st, []Effect{
				Log{fmt.Sprintf("the child ended (%s) while asleep in profile %s: not restarting it until the instance leaves the profile", kind, name)},
				StayAsleep{fmt.Sprintf("asleep in profile %s: the child ended (%s)", name, kind)},
			}
		}
	}
	if notifyDeath {
		// gpuguard's own notification killed it: no crash, no backoff,
		// not counted against max_restarts.
		detail := fmt.Sprintf("killed by %s, the notify signal sent %s earlier for the live change to %s (its handler was not in place)",
			policy.SignalName(e.Signal), in.Now.Sub(in.Notified).Round(time.Millisecond), name)
		return st, []Effect{
			Log{fmt.Sprintf("the child was %s; restarting it in profile %s", detail, name)},
			Requested{Level: g.Level, From: name, Kind: ExitRequested, Status: e.Status(), Detail: detail, Why: NotifyDeath},
		}
	}
	if in.Fault != nil {
		return st.faulted(g, in)
	}
	return st.failed(g, in)
}

// faulted is a child's exit caused by a GPU fault: never an OOM, a crash
// or a clean end. Status 0 included: a server that shuts itself down
// "cleanly" because its GPU failed under it did not finish its work, and
// exiting 0 would tell the service manager that all is well.
// on_gpu_fault = "stop" ends gpuguard with exit 1 (restarting onto a
// broken GPU would loop); "restart" restarts in the same profile, with
// backoff, once the GPU answers again (the next start waits: start).
func (st State) faulted(g Given, in Exited) (State, []Effect) {
	pol, e, f := g.Policy, in.Exit, in.Fault
	detail := fmt.Sprintf("the child exited with status %d after a GPU fault on GPU %d (%s): %s", e.Status(), f.Index, f.UUID, f.Meaning)
	giveUp := func(detail string) []Effect {
		return []Effect{
			Journal{api.Event{Event: api.EventGiveUp, Reason: api.ReasonGPUFault, Status: new(e.Status()), Detail: detail}},
			Finish{State: api.StateFatal, End: EndFailure, Err: fmt.Errorf("giving up: %s", detail)},
		}
	}
	if pol.Restart.OnGPUFault != policy.OnGPUFaultRestart {
		return st, giveUp(detail + "; on_gpu_fault = \"stop\"")
	}
	delay, over := st.budget.Failure(in.Now, in.Ran, pol.Restart)
	if over {
		return st, giveUp(fmt.Sprintf("%s; %d restarts within %s (max_restarts)", detail, pol.Restart.MaxRestarts, pol.Restart.Window))
	}
	st.faultWait, st.faultNoted = true, false
	return st, []Effect{
		Restart{Kind: ExitGPUFault, To: g.Level, Evidence: detail, Status: e.Status()},
		Log{fmt.Sprintf("%s: restarting in profile %s once the GPU answers again", detail, pol.Profiles[g.Level].Name)},
		Relaunch{Delay: delay, Level: g.Level, Why: Reason(ExitGPUFault)},
	}
}

// lost applies on_gpu_lost = "stop": stop the child as gpuguard's own
// stops do (stop_signal, then SIGKILL to its group after stop_timeout)
// and exit 1, or exit 1 at once with no child. Not the child's status:
// the child did not fail, and the status it leaves after a stop signal
// (often 0) would tell the service manager that all is well.
func lost(pol *policy.Policy, in Lost) []Effect {
	effs := []Effect{Journal{api.Event{Event: api.EventGiveUp, Reason: ReasonGPULost, Detail: in.Err.Error()}}}
	if !in.Running {
		return append(effs, Finish{State: api.StateFatal, End: EndFailure, Err: in.Err})
	}
	sig := pol.Restart.StopSignal
	effs = append(effs, Log{fmt.Sprintf("GPU lost: stopping the child (%v)", in.Err)}, BeginStop{Sig: sig}, AnnounceStop{})
	if !in.Restarting { // else the stop signal is already on its way
		effs = append(effs, StopChild{sig})
	}
	return effs
}

// ReasonGPULost is the give-up event's reason when on_gpu_lost = "stop"
// ends the run.
const ReasonGPULost = "gpu_lost"
