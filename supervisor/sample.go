package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// onSample takes one probe result: it records it, then hands the
// decision core what the sample means for the state the instance is in
// (a waiting start, the watermark rules, a wake, [serve] idle).
func (l *loop) onSample(r sampleResult) {
	hung := l.pace.answered() // already counted as a failure
	now := time.Now()
	defer l.pace.reschedule(r, now) // after the period this result sets
	if n := l.ledger.Expire(now); len(n) > 0 {
		l.deps.Logf("%d admission lease(s) expired", len(n))
		l.leasesChanged()
	}
	if l.deps.Meter != nil && !hung {
		l.deps.Meter.ObserveProbe(r.took, r.err)
	}
	l.fit.describe(l.cfg.Describe, r)
	if r.err != nil {
		l.pace.setPeriod(0, l.pol.Watch.Interval)
		l.feed(core.Gap{}, nil)
		l.health.report(&l.out, now, now, r.err.Error(), !hung)
		l.withoutReading(now, r)
		return
	}
	if down, told := l.health.recovered(now); told { // a run of failures ends
		l.deps.Logf("GPU probe recovered after %s without a reading", down.Round(time.Millisecond))
	}
	l.faults.answered(r.sample, &l.out)
	l.latest.lastSample, l.latest.haveSample = r.sample, true
	run := &l.life.run
	if run.child != nil && r.forPID == run.child.PID() && r.tree != nil {
		run.childTree = make(map[int]bool, len(r.tree))
		for _, pid := range r.tree {
			run.childTree[pid] = true
		}
	}
	if l.pol.Watch.Scope == "process" {
		l.latest.ratio = core.ProcessRatio(*reading(r.sample), run.childTree, l.pol.Watch.Quota)
	} else {
		l.latest.ratio = core.DeviceRatio(devices(r.sample.Devices), l.pol)
	}
	l.pace.forecast(now, l.latest.ratio, l.pol)
	if run.child != nil {
		l.minute.note(now, l.latest.ratio, worstGPU(r.sample.Devices, l.pol), l.pol.Watermark, &l.out)
	}
	used, total, _ := startUsage(r.sample, run.childTree)
	l.feed(core.Settling{Now: now, Read: true, Running: run.child != nil, Used: used, Total: total}, nil)
	// Publish the sample before a start it may lead to, so that anyone who
	// sees the new child also sees the GPUs it was started against. (The
	// loop publishes after every event anyway.)
	if l.life.state == api.StateWaiting {
		l.publishSnapshot()
	}
	switch {
	case l.life.state == api.StateWaiting:
		l.feed(l.startFacts(now, r), nil)
	case l.life.steady():
		if l.life.state == api.StateStarting {
			l.life.state = api.StateRunning
		}
		l.applyWatermark(now)
	}
	// What the child uses while it serves is the needs of a later wake
	// into a profile that states none.
	if l.life.serving() && l.pol.Profiles[l.life.level].Serving() && !r.sample.ProcessesAt.IsZero() {
		l.latest.served = servedBy(r.sample, run.childTree)
	}
	if l.core.Waking() {
		l.feed(l.wakeFacts(now, r.due, false), nil)
	}
	l.feed(l.idleFacts(now), nil)
}

// applyWatermark hands the watermark rules the newest ratio. A
// coordinated instance's verdict goes to the tenants of its GPU as a
// proposal (core.Propose); a lone one's is taken (or, in observe mode,
// only reported).
func (l *loop) applyWatermark(now time.Time) {
	in := core.Sample{Now: now, Ratio: l.latest.ratio, Predicted: l.pace.fc.Predicted,
		Ran: now.Sub(l.life.run.childStart), ETA: l.pace.fc.ETA.Seconds()}
	switch {
	case l.coordinated():
		in.Shared, in.Proposing = true, l.peers.Proposing()
	case l.cfg.Observe && l.notesDecisions():
		in.PeerHeld = l.peers.Held(now)
	}
	l.feed(in, nil)
}

// goodReading is the newest reading while the probe answers: none when
// there is no sample yet or the last call failed (it is stale).
func (l *loop) goodReading() (gpu.Sample, bool) {
	return l.latest.lastSample, l.latest.haveSample && !l.health.down()
}

// claimOn is what a start or a live wake judged on the sample due at due
// (zero: none) knows of its turn on shared GPUs.
func (l *loop) claimOn(due time.Time) core.Claim {
	return core.Claim{Peers: l.peers != nil, GPUs: watchedUUIDs(l.latest.lastSample.Devices), Due: due}
}

// startFacts are a waiting start's facts at sample r.
func (l *loop) startFacts(now time.Time, r sampleResult) core.Start {
	w := &l.life.wait
	in := core.Start{Now: now, Target: w.target, Err: r.err, Release: len(w.release) > 0,
		Waited: now.Sub(w.waitSince), Faulted: l.faults.anyFaulted(), Claim: l.claimOn(r.due)}
	if r.err == nil {
		in.Devices = devices(r.sample.Devices)
		in.Alive = anyAlive(r.sample, w.release)
	}
	return in
}

// wakeFacts are a wake's facts at now: a held request (request), or the
// sample due at due while a wake is wanted.
func (l *loop) wakeFacts(now, due time.Time, request bool) core.Wake {
	w := core.Wake{Now: now, Request: request, Stopping: l.life.stop.stopping || l.life.end.finished,
		Stopped: l.life.stoppedAsleep(), Live: l.life.steady() && l.life.state == api.StateAsleep,
		Waiting: l.life.state == api.StateWaiting, Tree: l.life.run.childTree, Served: l.latest.served, Claim: l.claimOn(due)}
	if s, ok := l.goodReading(); ok {
		w.Reading = reading(s)
	}
	return w
}

// idleFacts are [serve] idle's facts at now: whether the server can
// answer (a front door saw it healthy, it runs, nothing else is under
// way), and since when it has had nothing to do (the newest of its
// start, its last wake and the last request).
func (l *loop) idleFacts(now time.Time) core.IdleCheck {
	run := l.life.run
	since := run.childStart
	if run.awake.After(since) {
		since = run.awake
	}
	if last := time.Unix(0, l.s.lastRequest.Load()); last.After(since) {
		since = last
	}
	return core.IdleCheck{Now: now, Since: since, Ready: l.life.serving() && l.door.healthy}
}
