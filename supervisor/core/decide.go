package core

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// Decide is the transition: the state after in, and what the loop must
// do about it, in order. It does no I/O and reads no clock.
func Decide(st State, in Input) (State, []Effect) {
	switch in := in.(type) {
	case Sample:
		return st.sample(in)
	case Gap:
		st.Rules.Gap()
	case Launched:
		st.Rules.Reset()
		st.undo = nil
	case Peer:
		return st.step(in.Now, in.Ratio, in.Reason, in.Why)
	case NotTaken:
		if st.undo != nil {
			st.Rules, st.undo = *st.undo, nil
		}
	case ManualStep:
		return st.manual(in)
	case Exited:
		return st.exited(in)
	case NoFitEver:
		return st.noFitEver(in)
	case Start:
		return st.start(in)
	case StopSignal:
		return st, stop(st.Policy, in)
	case Lost:
		return st, lost(st.Policy, in)
	case StopWaitOver:
		effs := []Effect{Log{fmt.Sprintf("child did not exit within %s; killing its process group", st.Policy.Restart.StopTimeout)}}
		if in.Running {
			effs = append(effs, Kill{})
		}
		return st, effs
	case BackoffOver:
		return st, []Effect{Relaunch{Level: in.Target}}
	case IdleCheck:
		return st.idle(in)
	case PeerNobody:
		return st.nobody(in)
	}
	return st, nil
}

// sample applies the watermark rules to a running child's reading.
func (st State) sample(in Sample) (State, []Effect) {
	pol, wm := st.Policy, st.Policy.Watermark
	v := st.Rules.Observe(in.Now, in.Ratio, in.Predicted, wm, st.Level, len(pol.Profiles))
	switch {
	case v == Hold:
		return st, nil
	case v == StepUp && !pol.Profiles[st.Level].Serving():
		return st, nil // serving = false: only a request, a step up or a reload wakes it, never recover_after
	case v == CriticalAtLast:
		return st, []Effect{
			Journal{api.Event{Event: api.EventCritical, Watermark: in.Ratio,
				Detail: fmt.Sprintf("watermark %.2f >= critical %.2f at the last profile; nothing lower to step to", in.Ratio, wm.Critical)}},
			Log{fmt.Sprintf("watermark %.2f above critical at the last profile %s: nothing lower", in.Ratio, pol.Profiles[st.Level].Name)},
		}
	case in.PeerHeld:
		return st, nil // another tenant stepped for this pressure: a yield, noted
	}
	// The rules never ask for a step the ladder cannot take (none lower at
	// the last profile, none higher at the first), so the step is what a
	// coordinator's decision for this instance would be.
	r := v.Reason()
	why := r.Why(in.Ratio, wm, in.ETA)
	if !st.Observe {
		return st.step(in.Now, in.Ratio, r, why)
	}
	st.Rules.Stepped(in.Now)
	if v == StepUp {
		return st, []Effect{Log{fmt.Sprintf("observe: would %s (%s)", v, why)}}
	}
	from, to := pol.Profiles[st.Level].Name, pol.Profiles[st.Level+1].Name
	return st, []Effect{
		Journal{api.Event{Event: api.EventObserve, Reason: api.ReasonObserve, Watermark: in.Ratio,
			From: from, To: to, Detail: fmt.Sprintf("would %s: %s", v, why)}},
		Log{fmt.Sprintf("observe: would %s to %s (%s)", v, to, why)},
	}
}

// step is one step for reason r, decided by the instance's rules or by
// the tenants of a shared GPU: the sustain timer and the grace period
// restart with it. A live step can fail (NotTaken); a critical restart
// always happens.
func (st State) step(now time.Time, ratio float64, r Reason, why string) (State, []Effect) {
	pol := st.Policy
	last := st.Level >= len(pol.Profiles)-1
	switch {
	case r.Up():
		if st.Level == 0 {
			return st, nil
		}
		st.stepped(now)
		return st, []Effect{Step{Now: now, To: st.Level - 1, Reason: r, Why: why, Event: api.EventStepUp}}
	case last:
		if !st.Rules.FloorAlarm(now, ratio, pol.Watermark) {
			return st, nil
		}
		detail := fmt.Sprintf("watermark %.2f >= critical %.2f at the last profile; nothing lower to step to", ratio, pol.Watermark.Critical)
		return st, []Effect{Journal{api.Event{Event: api.EventCritical, Watermark: ratio, Detail: detail}}, Log{detail}}
	case r == Critical:
		st.Rules.Stepped(now)
		st.undo = nil
		return st, []Effect{Step{Now: now, To: st.Level + 1, Reason: r, Why: why, Event: api.EventStepDown, Restart: true}}
	}
	st.stepped(now)
	return st, []Effect{Step{Now: now, To: st.Level + 1, Reason: r, Why: why, Event: api.EventStepDown}}
}

// stepped records a step that may yet be NotTaken.
func (st *State) stepped(now time.Time) {
	saved := st.Rules
	st.undo = &saved
	st.Rules.Stepped(now)
}

// manual is `gpuguard step`: refused at either end of the ladder, while
// no child runs, and when the profile would not fit (a restart into it
// would only bring the child back where it was).
func (st State) manual(in ManualStep) (State, []Effect) {
	pol := st.Policy
	to, dir, event := st.Level+1, "down", api.EventStepDown
	if in.Up {
		to, dir, event = st.Level-1, "up", api.EventStepUp
	}
	refuse := func(err error) (State, []Effect) { return st, []Effect{Reply{err}} }
	switch {
	case to < 0:
		return refuse(fmt.Errorf("already at the first profile %s", pol.Profiles[0].Name))
	case to >= len(pol.Profiles):
		return refuse(fmt.Errorf("already at the last profile %s", pol.Profiles[st.Level].Name))
	case !in.Running:
		return refuse(fmt.Errorf("instance is %s; try again once it runs", in.State))
	}
	if why := StepFit(pol, st.Level, to, in.Reading, in.Tree); why != "" {
		return refuse(errors.New(why))
	}
	st.stepped(in.Now)
	return st, []Effect{Step{Now: in.Now, To: to, Reason: Manual, Why: "manual step " + dir, Event: event, Manual: true}}
}

// failed is the restart rules for a child that failed (or ended cleanly)
// on its own, with nothing of gpuguard's to explain it: a clean exit ends the run; an OOM restarts one profile
// lower; a crash restarts in place when on_crash says so; both count
// against max_restarts within the window, after a growing backoff. A child
// that never started (Starts) ends the run at once.
func (st State) failed(in Exited) (State, []Effect) {
	pol, e := st.Policy, in.Exit
	kind, evidence := ClassifyExit(e, pol.OOM, in.Told)
	next := st.Level
	var effs []Effect
	switch kind {
	case ExitClean:
		return st, []Effect{Finish{State: api.StateExited, End: EndOK}}
	case ExitOOM:
		next = min(st.Level+1, len(pol.Profiles)-1)
		effs = append(effs, Journal{api.Event{Event: api.EventOOM, Detail: evidence, Stderr: LastLines(e.Stderr, 20)}})
	case ExitCrash:
		if !pol.Restart.OnCrash {
			return st, []Effect{Finish{State: api.StateExited, End: EndStatus, Status: e.Status()}}
		}
	}
	rp := pol.Restart
	quick, never := st.Starts.failed(in.Ran, in.Ready, kind, rp)
	if never {
		return st, append(effs, st.Starts.neverStarted(e, in.Ran, rp)...)
	}
	delay, giveUp := st.Budget.Failure(in.Now, in.Ran, rp)
	if giveUp {
		return st, append(effs,
			Journal{api.Event{Event: api.EventGiveUp, Status: ptr(e.Status()),
				Detail: fmt.Sprintf("%d restarts within %s (max_restarts)", rp.MaxRestarts, rp.Window)}},
			Log{fmt.Sprintf("giving up: %d restarts within %s", rp.MaxRestarts, rp.Window)},
			Finish{State: api.StateFatal, End: EndStatus, Status: e.Status()})
	}
	n, of := st.Budget.InWindow(), rp.MaxRestarts
	text := fmt.Sprintf("the child crashed (status %d): restarting (%d of %d) after backoff %s", e.Status(), n, of, delay)
	if kind == ExitOOM {
		text = fmt.Sprintf("out of memory (%s): restarting in profile %s (%d of %d) after backoff %s", evidence, pol.Profiles[next].Name, n, of, delay)
	}
	if quick {
		text += st.Starts.quickNote(in.Ran, rp)
	}
	return st, append(effs,
		Restart{Kind: kind, To: next, Evidence: evidence, Status: e.Status()},
		Log{text},
		Relaunch{Delay: delay, Level: next})
}

// stop is an operator's stop: forwarded once, a second one kills; with no
// child the run ends at once, as a signal's death would (128 + signal).
func stop(pol *policy.Policy, in StopSignal) []Effect {
	ev := Journal{api.Event{Event: api.EventStop, Detail: "signal " + in.Sig.String()}}
	switch {
	case in.Sig == syscall.SIGURG:
		return nil // the Go runtime's own, never forwarded
	case !in.Running:
		return []Effect{ev, Finish{State: api.StateExited, End: EndSignal, Status: int(in.Sig)}}
	case in.Stopping && in.Lost:
		return []Effect{BeginStop{Sig: in.Sig, TakeOver: true}, ev, StopChild{in.Sig}}
	case in.Stopping:
		return []Effect{Log{fmt.Sprintf("second %s: killing the child's process group now", in.Sig)}, Kill{}}
	}
	return []Effect{
		BeginStop{Sig: in.Sig},
		Log{fmt.Sprintf("%s: stopping the child (waiting up to %s; press Ctrl-C again, or send another signal, to kill it now)",
			policy.SignalName(in.Sig), pol.Restart.StopTimeout)},
		ev, AnnounceStop{}, StopChild{in.Sig},
	}
}

// noFitEver ends a waiting run whose ladder cannot fit the GPUs even
// empty: waiting would be for ever, whatever when_full says.
func (st State) noFitEver(in NoFitEver) (State, []Effect) {
	why := NeverFits(st.Policy, in.Devices)
	if why == "" {
		return st, nil
	}
	return st, []Effect{
		NoteFit{JudgeFit(st.Policy, in.Target, in.Devices), "no profile can ever fit"},
		Finish{State: api.StateFatal, End: EndNoFit, Err: fmt.Errorf("%w, ever: %s", ErrNoFit, why)},
	}
}

// start picks the profile of a waiting start: the first from the target
// down that fits, else what when_full says (wait, the lowest, or exit).
func (st State) start(in Start) (State, []Effect) {
	pol := st.Policy
	j := JudgeFit(pol, in.Target, in.Devices)
	if j.OK {
		return st, []Effect{Launch{j.Level, j, "starting in " + pol.Profiles[j.Level].Name}}
	}
	free := FreeText(pol, in.Devices)
	switch pol.Restart.WhenFull {
	case policy.WhenFullLowest:
		return st, []Effect{Launch{len(pol.Profiles) - 1, j, "no profile fits; starting in the last profile (when_full = \"lowest\")"}}
	case policy.WhenFullExit:
		return st, []Effect{
			NoteFit{j, "no profile fits; exiting (when_full = \"exit\")"},
			Finish{State: api.StateFatal, End: EndNoFit, Err: fmt.Errorf("%w the free GPU memory (when_full = \"exit\"): %s", ErrNoFit, free)},
		}
	}
	return st, []Effect{Wait{j, free}}
}

// FreeText is the devices' usage against their limits, for people.
func FreeText(pol *policy.Policy, devs []Device) string {
	var parts []string
	for _, d := range devs {
		parts = append(parts, fmt.Sprintf("GPU %d: %s used of %s", d.Index,
			policy.FormatSize(d.Used), policy.FormatSize(pol.Limit(d.Total))))
	}
	return strings.Join(parts, ", ")
}

// LastLines returns up to n last non-empty lines of b.
func LastLines(b []byte, n int) []string {
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
