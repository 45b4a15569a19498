package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// changeProfile moves to level the way the core says (core.HowToChange):
// live, through server actions, by a graceful restart, or by stopping the
// child to sleep. reply (if any) gets the new profile once the
// state file is written and the event published.
//
// A live change whose state file cannot be written does not happen: no
// event, no signal, nothing published, the level unchanged; it returns
// false, and reply (if any) gets the reason.
func (l *loop) changeProfile(level int, reason, why string, reply chan response) bool {
	event := api.EventStepDown
	if level < l.life.level {
		event = api.EventStepUp
	}
	from, to := l.pol.Profiles[l.life.level], l.pol.Profiles[level]
	steps := l.life.acts.plan(from, to, l.pol.Serve.Upstream)
	if how := core.HowToChange(l.pol, l.life.level, level, len(steps)); how != core.ByLive {
		l.out.Emit(l.life.forRoom(stepEvent(l.pol, l.life.level, l.latest.ratio, event, level, reason, why)))
		switch how {
		case core.ByActions:
			l.life.state = api.StateStepping
			run := &actionRun{to: to.Name, reason: reason, why: why, reply: reply, sleeping: !to.Serving()}
			if s, ok := l.latest.good(l.health.Down()); ok {
				run.before, _, _ = startUsage(s, l.life.run.childTree)
				run.known = true
			}
			l.life.acts.change(l.ctx, l.deps.Actions, l.deps.Door, steps, l.pol.Restart.StopTimeout, run, l.s.done, l.deps.Logf)
		default:
			l.life.beginRestart(l.pol, level, reason, reply, how == core.BySleep)
		}
		return true
	}
	// The event is dated when the step is taken, before the write; it is
	// journaled only once the state file is written.
	ev := l.life.forRoom(stepEvent(l.pol, l.life.level, l.latest.ratio, event, level, reason, why))
	ev.Time = time.Now()
	st, err := l.life.file.writeAt(l.pol.Profiles[level], level, why)
	if err != nil {
		l.life.file.notWritten(&l.out, l.pol, l.life.level, l.latest.ratio, event, level, err, reply)
		return false
	}
	l.out.Emit(ev)
	l.life.level = level
	// Status shows the step before the child hears of it (and before the
	// reply): whoever learns of the change from either finds it there.
	l.publishSnapshot()
	l.life.run.notify(l.pol.Notify.Signal, st, &l.out)
	l.out.publish(st)
	l.deps.Logf("%s to profile %s (%s)", event, l.pol.Profiles[level].Name, why)
	if reply != nil {
		reply <- response{profile: l.pol.Profiles[level].Name}
	}
	return true
}

// stepEvent is the journal event of a step from level from to to, at
// watermark ratio.
func stepEvent(pol *policy.Policy, from int, ratio float64, event string, to int, reason, why string) api.Event {
	return api.Event{Event: event, Reason: reason, Watermark: ratio,
		From: pol.Profiles[from].Name, To: pol.Profiles[to].Name,
		FromLevel: new(from), ToLevel: new(to), Detail: why}
}

// manualStep handles `gpuguard step` and the socket's step request.
func (l *loop) manualStep(r request) {
	in := core.ManualStep{Now: time.Now(), Up: r.up, State: l.life.state, Tree: l.life.run.childTree,
		Running: l.life.steady(), Stopped: l.life.stoppedAsleep()}
	in.Reading = l.latest.reading(l.health.Down())
	l.feed(in, r.reply)
}
