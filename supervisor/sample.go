package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
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
		l.feed(l.life.startFacts(now, r, l.faults.anyFaulted(), l.latest.claim(l.peers != nil, r.due)), nil)
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
		l.feed(l.life.wakeFacts(now, false, l.latest.reading(l.health.down()), l.latest.served, l.latest.claim(l.peers != nil, r.due)), nil)
	}
	l.feed(l.life.idleFacts(now, time.Unix(0, l.s.lastRequest.Load())), nil)
}

// applyWatermark hands the watermark rules the newest ratio. A
// coordinated instance's verdict goes to the tenants of its GPU as a
// proposal (core.Propose); a lone one's is taken (or, in observe mode,
// only reported).
func (l *loop) applyWatermark(now time.Time) {
	in := core.Sample{Now: now, Ratio: l.latest.ratio, Predicted: l.pace.fc.Predicted,
		Ran: now.Sub(l.life.run.childStart), ETA: l.pace.fc.ETA.Seconds()}
	switch coordinated, notes := l.sharing(); {
	case coordinated:
		in.Shared, in.Proposing = true, l.peers.Proposing()
	case notes && l.cfg.Observe:
		in.PeerHeld = l.peers.Held(now)
	}
	l.feed(in, nil)
}
