package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// onSample takes one probe result: it records it, then lets the state
// decide (start a waiting child, or apply the watermark rules).
func (l *loop) onSample(r sampleResult) {
	hung := l.pace.answered() // already counted as a failure
	now := time.Now()
	defer l.pace.reschedule(r, now) // after the period this result sets
	if n := l.ledger.Expire(now); len(n) > 0 {
		l.deps.Logf("%d admission lease(s) expired", len(n))
		l.shared.leasesChanged(l.s.adm.publishLeases)
	}
	if l.deps.Meter != nil && !hung {
		l.deps.Meter.ObserveProbe(r.took, r.err)
	}
	l.fit.describe(l.cfg.Describe, r)
	if r.err != nil {
		l.pace.setPeriod(0, l.pol.Watch.Interval)
		l.decide(core.Gap{})
		l.health.report(&l.out, now, now, r.err.Error(), !hung)
		l.withoutReading(now, r)
		return
	}
	if down, told := l.health.recovered(now); told { // a run of failures ends
		l.deps.Logf("GPU probe recovered after %s without a reading", down.Round(time.Millisecond))
	}
	l.faults.answered(r.sample, &l.out)
	l.latest.lastSample, l.latest.haveSample = r.sample, true
	if l.life.run.child != nil && r.forPID == l.life.run.child.PID() && r.tree != nil {
		l.life.run.childTree = make(map[int]bool, len(r.tree))
		for _, pid := range r.tree {
			l.life.run.childTree[pid] = true
		}
	}
	if l.pol.Watch.Scope == "process" {
		l.latest.ratio = core.ProcessRatio(*reading(r.sample), l.life.run.childTree, l.pol.Watch.Quota)
	} else {
		l.latest.ratio = core.DeviceRatio(devices(r.sample.Devices), l.pol)
	}
	l.pace.forecast(now, l.latest.ratio, l.pol)
	if l.life.run.child != nil {
		l.minute.note(now, l.latest.ratio, worstGPU(r.sample.Devices, l.pol), l.pol.Watermark, &l.out)
	}
	l.shared.sample(now, r, l.life.run.child != nil, l.life.run.childTree, l.pol.Watch.Settle)
	// Publish the sample before a start it may lead to, so that anyone who
	// sees the new child also sees the GPUs it was started against. (The
	// loop publishes after every event anyway.)
	if l.life.state == api.StateWaiting {
		l.publishSnapshot()
	}
	switch {
	case l.life.state == api.StateWaiting:
		l.tryStart(r)
	case l.life.run.child != nil && !l.life.stop.stopping && l.life.plan == nil && !l.acts.acting():
		if l.life.state == api.StateStarting {
			l.life.state = api.StateRunning
		}
		l.applyWatermark(now)
	}
	l.wake.sample(l.sleepView(), now, r)
}

// applyWatermark runs the watermark rules on the newest ratio and performs
// (or, in observe mode, only reports) their verdict. A coordinated
// instance's sample goes to the tenants of its GPU instead; a lone one's
// never enters the shared-GPU code.
func (l *loop) applyWatermark(now time.Time) {
	in := core.Sample{Now: now, Ratio: l.latest.ratio, Predicted: l.pace.predicted(now, l.life.run.childStart, l.pol.Watermark.Grace),
		ETA: l.pace.fc.ETA.Seconds()}
	if l.shared.coordinated(l.cfg.Observe, l.pol.Watch.Scope) {
		// the tenants of the GPU decide together
		l.shared.proposeSample(l.ctx, l.s.done, in, &l.core.Rules, l.pol, l.latest.lastSample.Devices, l.peerFacts)
		return
	}
	in.PeerHeld = l.shared.observeHeld(now, l.cfg.Observe, l.pol.Watch.Scope)
	l.doAll(l.decide(in), nil)
}

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
	if level < l.level {
		event = api.EventStepUp
	}
	from, to := l.pol.Profiles[l.level], l.pol.Profiles[level]
	steps := l.acts.plan(from, to, l.pol.Serve.Upstream)
	if how := core.HowToChange(l.pol, l.level, level, len(steps)); how != core.ByLive {
		l.out.emit(stepEvent(l.pol, l.level, l.latest.ratio, event, level, reason, why))
		switch how {
		case core.BySleep:
			l.wake.begin(l.sleepView(), level, reason, reply)
		case core.ByActions:
			l.life.state = api.StateStepping
			l.acts.change(l.ctx, l.deps.Actions, l.deps.Door, steps, l.pol.Restart.StopTimeout,
				&actionRun{to: to.Name, reason: reason, why: why, reply: reply}, l.s.done, l.deps.Logf)
		default:
			l.beginRestart(level, reason, reply)
		}
		return true
	}
	// The event is dated when the step is taken, before the write, as it
	// was when it was journaled first; it is journaled only once the
	// state file is written.
	ev := stepEvent(l.pol, l.level, l.latest.ratio, event, level, reason, why)
	ev.Time = time.Now()
	st, err := l.stateFile.writeAt(l.pol.Profiles[level], level, why)
	if err != nil {
		l.stateFile.notWritten(&l.out, l.pol, l.level, l.latest.ratio, event, level, err, reply)
		return false
	}
	l.out.emit(ev)
	l.level = level
	l.life.run.notify(l.pol.Notify.Signal, st, &l.out)
	l.out.publish(st)
	l.deps.Logf("%s to profile %s (%s)", event, l.pol.Profiles[level].Name, why)
	if reply != nil {
		l.publishSnapshot() // a status asked after the reply shows the step
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

// beginRestart stops the child with stop_signal so that it restarts in
// level (GPUGUARD_LAST_EXIT=watermark).
func (l *loop) beginRestart(level int, reason string, reply chan response) {
	l.life.plan = &restartPlan{level: level, reason: reason, from: l.pol.Profiles[l.level].Name}
	if reply != nil {
		l.life.plan.replies = append(l.life.plan.replies, reply)
	}
	l.life.state = api.StateStepping
	l.deps.Logf("restarting the child in profile %s (%s)", l.pol.Profiles[level].Name, reason)
	l.door.stop(l.life.run.child, l.pol.Restart.StopSignal, l.pol.Restart.StopTimeout, &l.life.stop.stopWait)
}

// manualStep handles `gpuguard step` and the socket's step request.
func (l *loop) manualStep(r request) {
	if l.wake.manualWake(l.sleepView(), r) {
		return
	}
	in := core.ManualStep{Now: time.Now(), Up: r.up, State: l.life.state, Tree: l.life.run.childTree,
		Running: l.life.run.child != nil && !l.life.stop.stopping && l.life.plan == nil && !l.acts.acting()}
	if l.latest.haveSample && !l.health.down() {
		in.Reading = reading(l.latest.lastSample)
	}
	l.doAll(l.decide(in), r.reply)
}
