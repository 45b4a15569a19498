package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/exitcode"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// feed hands one input to the decision core, with what the loop holds
// now (the policy in force, the level, observe mode), and performs the
// effects it returns, in order; reply is the request's, if any. The core
// is the only writer of its state: the loop changes it only here.
func (l *loop) feed(in core.Input, reply chan response) {
	var effs []core.Effect
	l.core, effs = core.Decide(l.core, core.Given{Policy: l.pol, Level: l.life.level, Observe: l.cfg.Observe}, in)
	for _, e := range effs {
		l.do(e, reply)
	}
}

// do performs one effect of the core.
func (l *loop) do(e core.Effect, reply chan response) {
	switch e := e.(type) {
	case core.Step:
		l.performStep(e, reply)
	case core.Journal:
		l.out.Emit(e.Event)
	case core.Log:
		l.deps.Logf("%s", e.Text)
	case core.Reply:
		reply <- response{err: e.Err}
	case core.NoteFit:
		l.fit.note(&l.out, l.pol, l.life.hist, time.Time{}, e.Fit, e.Outcome, e.Why)
	case core.Launch:
		l.launch(e)
	case core.Wait:
		// Told once per wait.
		if !l.life.wait.waitNoted {
			l.life.wait.waitNoted = true
			l.fit.note(&l.out, l.pol, l.life.hist, time.Time{}, e.Fit, "no profile fits; waiting for memory", e.Why)
			l.deps.Logf("no profile fits the free GPU memory (%s); waiting", e.Free)
			l.out.Emit(api.Event{Event: api.EventWaiting, Detail: e.Free})
		}
	case core.Finish:
		l.life.state = e.State
		l.life.finish(exitCode(e), e.Err)
	case core.Restart:
		l.life.hist.restarts++
		l.life.hist.lastExit = string(e.Kind)
		l.out.Emit(api.Event{Event: api.EventRestart, Reason: string(e.Kind), From: l.pol.Profiles[l.life.level].Name,
			To: l.pol.Profiles[e.To].Name, FromLevel: new(l.life.level), ToLevel: new(e.To),
			Restarts: l.life.hist.restarts, Status: new(e.Status), Detail: e.Evidence})
	case core.Relaunch:
		l.life.restartAfter(e.Delay, e.Level, l.life.wait.release, e.Why)
	case core.Requested:
		// Counted and journaled at once, outside the crash budget.
		l.life.hist.restarts++
		l.life.hist.lastExit = string(e.Kind)
		l.out.Emit(api.Event{Event: api.EventRestart, Reason: string(e.Kind), From: e.From,
			To: l.pol.Profiles[e.Level].Name, Restarts: l.life.hist.restarts, Status: new(e.Status), Detail: e.Detail})
		l.life.enterWaiting(e.Level, l.life.wait.release, e.Why)
	case core.Released:
		l.life.wait.release = nil
	case core.SampleNow:
		l.pace.SampleNow()
	case core.BeginStop:
		if e.TakeOver {
			// gpuguard was stopping the child for a lost GPU; the
			// operator's stop takes over, and the exit is the child's.
			l.health.ForgetLost()
		} else {
			l.life.stop.stopping = true
			l.life.state = api.StateStopping
		}
	case core.AnnounceStop:
		l.life.notifyStopping()
		l.life.failPlan()
	case core.StopChild:
		l.life.stopChild(e.Sig, l.pol.Restart.StopTimeout)
	case core.Kill:
		_ = l.life.run.child.Kill()
	case core.FellAsleep:
		l.life.fellAsleep(l.pol)
	case core.StayAsleep:
		l.life.asleep(l.pol, l.life.level, e.Why)
	case core.WakeStopped:
		if !e.Manual {
			reply = nil
		}
		l.life.wakeStopped(l.pol, l.latest.ratio, e.To, string(e.Reason), e.Why, reply)
	case core.Propose:
		l.peers.Propose(l.ctx, e.Now, e.Reason, worstGPU(l.latest.lastSample.Devices, l.pol), e.Ratio, func() api.TenantInfo { return l.self.info(l.pol, nil) })
	case core.ClaimStart:
		l.peers.ClaimStart(l.ctx, e.GPUs, e.Settle)
	case core.AskRoom:
		l.peers.MakeRoom(l.ctx, api.RoomAsk{GPU: e.GPU, Priority: e.Priority, Shortfall: e.Shortfall})
	case core.Entered:
		l.entered(e.To, e.Why, reply)
	case core.FallBack:
		l.life.acts.entered = false
		l.life.beginRestart(l.pol, e.To, string(e.Reason), reply, e.Sleep)
	case core.EndStart:
		if e.Log != "" {
			l.deps.Logf("%s", e.Log)
		}
		l.peers.EndStart()
	default:
		panic(fmt.Sprintf("supervisor: effect %T not performed", e))
	}
}

// performStep takes a step the core decided. A critical restart always
// happens; a live change that cannot write its state file does not (and
// a manual restart is refused first when the state file cannot be
// written, as the restarted child would not find it): the core is told,
// and forgets the step. A live wake's outcome goes back to the core
// either way (core.Woke).
func (l *loop) performStep(s core.Step, reply chan response) {
	reason := string(s.Reason)
	if s.Event == api.EventStepDown {
		l.life.roomFor = s.For // the peer it sleeps for, if any
	}
	if s.Restart {
		// The non-live form of To: a restart, or stopping the child when
		// To serves nothing (a child started there would serve against it).
		l.out.Emit(stepEvent(l.pol, l.life.level, l.latest.ratio, s.Event, s.To, reason, s.Why))
		l.life.beginRestart(l.pol, s.To, reason, nil, !l.pol.Profiles[s.To].Serving())
		return
	}
	if s.Manual && !l.pol.Profiles[s.To].Live {
		if err := l.life.file.writable(l.pol.Profiles[l.life.level], l.life.level); err != nil {
			reply <- response{err: err}
			l.feed(core.NotTaken{}, nil)
			return
		}
	}
	if !s.Manual {
		reply = nil
	}
	taken := l.changeProfile(s.To, reason, s.Why, reply)
	switch {
	case s.Wake:
		l.feed(core.Woke{Now: s.Now, Taken: taken, Used: startBaseline(l.latest.lastSample, l.life.run.childTree)}, nil)
	case !taken:
		l.feed(core.NotTaken{}, nil) // the next sample tries again
	}
}

// exitCode is the exit status of a run that ends as f says.
func exitCode(f core.Finish) int {
	switch f.End {
	case core.EndOK:
		return exitcode.OK
	case core.EndNoFit:
		return exitcode.NoFit
	case core.EndFailure:
		return exitcode.Failure
	case core.EndConfig:
		return exitcode.Config
	case core.EndSignal:
		return exitcode.Signaled(f.Status)
	}
	return f.Status
}
