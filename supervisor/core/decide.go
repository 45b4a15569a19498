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
// do about it, in order. g is what the loop holds as in arrives (the
// policy in force, the level, observe mode). It does no I/O and reads no
// clock.
func Decide(st State, g Given, in Input) (State, []Effect) {
	switch in := in.(type) {
	case Sample:
		return st.sample(g, in)
	case Gap:
		st.rules.Gap()
	case Launched:
		return st.launched(g, in)
	case Peer:
		return st.peer(g, in)
	case Yielded:
		return st.yielded(in)
	case NotTaken:
		if st.undo != nil {
			st.rules, st.undo = *st.undo, nil
		}
	case ManualStep:
		return st.manual(g, in)
	case Exited:
		return st.exited(g, in)
	case Start:
		return st.start(g, in)
	case ClaimAnswer:
		effs := st.claim.answer(in, st.wake)
		return st, effs
	case Settling:
		effs := st.claim.settling(in, g.Policy.Watch.Settle)
		return st, effs
	case Ready:
		st.starts.ready = true
		effs := st.claim.end(in.Why)
		return st, effs
	case StopSignal:
		return st, stop(g.Policy, in)
	case Lost:
		return st, lost(g.Policy, in)
	case StopWaitOver:
		effs := []Effect{Log{fmt.Sprintf("child did not exit within %s; killing its process group", g.Policy.Restart.StopTimeout)}}
		if in.Running {
			effs = append(effs, Kill{})
		}
		return st, effs
	case BackoffOver:
		return st, []Effect{Relaunch{Level: in.Target, Why: in.Why}}
	case Begin:
		return st, begin(g)
	case Unstartable:
		return st, unstartable(in)
	case IdleCheck:
		return st.idle(g, in)
	case Wake:
		return st.wakeUp(g, in)
	case Woke:
		return st.woke(g, in)
	case PeerNobody:
		return st.nobody(g, in)
	case RoomAnswer:
		effs := st.room.answer(in)
		return st, effs
	case SleepFor:
		return st.sleepFor(g, in)
	case ActionsDone:
		return st.actionsDone(g, in)
	case Measured:
		return st.measured(g, in)
	}
	return st, nil
}

// sample applies the watermark rules to a running child's reading.
func (st State) sample(g Given, in Sample) (State, []Effect) {
	pol, wm := g.Policy, g.Policy.Watermark
	predicted := in.Predicted && in.Ran >= wm.Grace
	if in.Shared {
		return st.propose(wm, in, predicted)
	}
	v := st.rules.Observe(in.Now, in.Ratio, predicted, wm, g.Level, len(pol.Profiles))
	switch {
	case v == Hold:
		return st, nil
	case v == StepUp && !pol.Profiles[g.Level].Serving():
		return st, nil // serving = false: only a request, a step up or a reload wakes it, never recover_after
	case v == CriticalAtLast:
		return st, []Effect{
			Journal{api.Event{Event: api.EventCritical, Watermark: in.Ratio, Detail: atLast(in.Ratio, wm)}},
			Log{fmt.Sprintf("watermark %.2f above critical at the last profile %s: nothing lower", in.Ratio, pol.Profiles[g.Level].Name)},
		}
	case in.PeerHeld:
		return st, nil // another tenant stepped for this pressure: a yield, noted
	}
	// The rules never ask for a step the ladder cannot take (none lower at
	// the last profile, none higher at the first), so the step is what a
	// coordinator's decision for this instance would be.
	r := v.Reason()
	why := r.Why(in.Ratio, wm, in.ETA)
	if !g.Observe {
		return st.step(g, in.Now, in.Ratio, r, why)
	}
	st.rules.Stepped(in.Now)
	if v == StepUp {
		return st, []Effect{Log{fmt.Sprintf("observe: would %s (%s)", v, why)}}
	}
	from, to := pol.Profiles[g.Level].Name, pol.Profiles[g.Level+1].Name
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
func (st State) step(g Given, now time.Time, ratio float64, r Reason, why string) (State, []Effect) {
	pol := g.Policy
	last := g.Level >= len(pol.Profiles)-1
	switch {
	case r.Up():
		if g.Level == 0 {
			return st, nil
		}
		st.stepped(now)
		return st, []Effect{Step{Now: now, To: g.Level - 1, Reason: r, Why: why, Event: api.EventStepUp}}
	case last:
		if !st.rules.FloorAlarm(now, ratio, pol.Watermark) {
			return st, nil
		}
		detail := atLast(ratio, pol.Watermark)
		return st, []Effect{Journal{api.Event{Event: api.EventCritical, Watermark: ratio, Detail: detail}}, Log{detail}}
	case r == Critical:
		st.steppedForGood(now)
		return st, []Effect{Step{Now: now, To: g.Level + 1, Reason: r, Why: why, Event: api.EventStepDown, Restart: true}}
	}
	st.stepped(now)
	return st, []Effect{Step{Now: now, To: g.Level + 1, Reason: r, Why: why, Event: api.EventStepDown}}
}

// atLast is the critical event's detail at the last profile, where
// nothing lower can step.
func atLast(ratio float64, wm policy.Watermark) string {
	return fmt.Sprintf("watermark %.2f >= critical %.2f at the last profile; nothing lower to step to", ratio, wm.Critical)
}

// stepped records a step that may yet be NotTaken.
func (st *State) stepped(now time.Time) {
	saved := st.rules
	st.undo = &saved
	st.rules.Stepped(now)
}

// steppedForGood records a step that NotTaken cannot take back (an idle
// sleep, a wake): the grace after it holds either way.
func (st *State) steppedForGood(now time.Time) {
	st.rules.Stepped(now)
	st.undo = nil
}

// manual is `gpuguard step`: a step up wakes a stopped sleep; otherwise
// refused at either end of the ladder, while no child runs, and when the
// profile would not fit (a restart into it would only bring the child
// back where it was).
func (st State) manual(g Given, in ManualStep) (State, []Effect) {
	pol := g.Policy
	if in.Stopped && in.Up && g.Level > 0 {
		return st, []Effect{WakeStopped{To: g.Level - 1, Reason: Manual, Why: "manual step up", Manual: true}}
	}
	to, dir, event := g.Level+1, "down", api.EventStepDown
	if in.Up {
		to, dir, event = g.Level-1, "up", api.EventStepUp
	}
	refuse := func(err error) (State, []Effect) { return st, []Effect{Reply{err}} }
	switch {
	case to < 0:
		return refuse(fmt.Errorf("already at the first profile %s", pol.Profiles[0].Name))
	case to >= len(pol.Profiles):
		return refuse(fmt.Errorf("already at the last profile %s", pol.Profiles[g.Level].Name))
	case !in.Running:
		return refuse(fmt.Errorf("instance is %s; try again once it runs", in.State))
	}
	if why := StepFit(pol, g.Level, to, in.Reading, in.Tree); why != "" {
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
func (st State) failed(g Given, in Exited) (State, []Effect) {
	pol, e := g.Policy, in.Exit
	kind, evidence := ClassifyExit(e, pol.OOM, in.Told)
	next := g.Level
	var effs []Effect
	switch kind {
	case ExitClean:
		return st, []Effect{Finish{State: api.StateExited, End: EndOK}}
	case ExitOOM:
		next = min(g.Level+1, len(pol.Profiles)-1)
		effs = append(effs, Journal{api.Event{Event: api.EventOOM, Detail: evidence, Stderr: LastLines(e.Stderr, 20)}})
	case ExitCrash:
		if !pol.Restart.OnCrash {
			return st, []Effect{Finish{State: api.StateExited, End: EndStatus, Status: e.Status()}}
		}
	}
	rp := pol.Restart
	quick, never := st.starts.failed(in.Ran, kind, rp)
	if never {
		return st, append(effs, st.starts.neverStarted(e, in.Ran, rp)...)
	}
	delay, giveUp := st.budget.Failure(in.Now, in.Ran, rp)
	if giveUp {
		return st, append(effs,
			Journal{api.Event{Event: api.EventGiveUp, Status: new(e.Status()),
				Detail: fmt.Sprintf("%d restarts within %s (max_restarts)", rp.MaxRestarts, rp.Window)}},
			Log{fmt.Sprintf("giving up: %d restarts within %s", rp.MaxRestarts, rp.Window)},
			Finish{State: api.StateFatal, End: EndStatus, Status: e.Status()})
	}
	n, of := st.budget.InWindow(), rp.MaxRestarts
	text := fmt.Sprintf("the child crashed (status %d): restarting (%d of %d) after backoff %s", e.Status(), n, of, delay)
	if kind == ExitOOM {
		text = fmt.Sprintf("out of memory (%s): restarting in profile %s (%d of %d) after backoff %s", evidence, pol.Profiles[next].Name, n, of, delay)
	}
	if quick {
		text += st.starts.quickNote(in.Ran, rp)
	}
	return st, append(effs,
		Restart{Kind: kind, To: next, Evidence: evidence, Status: e.Status()},
		Log{text},
		Relaunch{Delay: delay, Level: next, Why: Reason(kind)})
}

// stop is an operator's stop: forwarded once, a second one kills; with no
// child the run ends at once, as a signal's death would (128 + signal). A
// child that gpuguard has already signalled (a step's restart under way)
// is not sent that signal again: the stop waits for the exit coming.
func stop(pol *policy.Policy, in StopSignal) []Effect {
	ev := Journal{api.Event{Event: api.EventStop, Detail: "signal " + in.Sig.String()}}
	switch {
	case in.Sig == syscall.SIGURG:
		return nil // the Go runtime's own, never forwarded
	case !in.Running:
		return []Effect{ev, Finish{State: api.StateExited, End: EndSignal, Status: int(in.Sig)}}
	case in.Stopping && in.Lost:
		effs := []Effect{BeginStop{Sig: in.Sig, TakeOver: true}, ev}
		if in.Signalled != in.Sig {
			effs = append(effs, StopChild{in.Sig})
		}
		return effs
	case in.Stopping:
		return []Effect{Log{fmt.Sprintf("second %s: killing the child's process group now", in.Sig)}, Kill{}}
	case in.Signalled == in.Sig:
		return []Effect{
			BeginStop{Sig: in.Sig},
			Log{fmt.Sprintf("%s: the child already has it (gpuguard is stopping it for a step); waiting for its exit, then stopping (press Ctrl-C again, or send another signal, to kill it now)",
				policy.SignalName(in.Sig))},
			ev, AnnounceStop{},
		}
	}
	return []Effect{
		BeginStop{Sig: in.Sig},
		Log{fmt.Sprintf("%s: stopping the child (waiting up to %s; press Ctrl-C again, or send another signal, to kill it now)",
			policy.SignalName(in.Sig), pol.Restart.StopTimeout)},
		ev, AnnounceStop{}, StopChild{in.Sig},
	}
}

// begin is the run's beginning: asleep with no child when the start
// level serves nothing (a child started there would serve against its
// profile), else the wait for the first start.
func begin(g Given) []Effect {
	if p := g.Policy.Profiles[g.Level]; !p.Serving() {
		return []Effect{StayAsleep{"start: asleep in profile " + p.Name}}
	}
	return []Effect{Relaunch{Level: g.Level, Why: FirstStart}}
}

// unstartable ends a run whose child could not start. The launcher's
// error names the command; it is what Run returns (the caller prints it
// once), not logged here.
func unstartable(in Unstartable) []Effect {
	if in.Expand {
		return []Effect{Finish{State: api.StateFatal, End: EndConfig, Err: fmt.Errorf("expanding the command: %w", in.Err)}}
	}
	return []Effect{
		Journal{api.Event{Event: api.EventGiveUp, Detail: in.Err.Error()}},
		Finish{State: api.StateFatal, End: EndFailure, Err: in.Err},
	}
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
