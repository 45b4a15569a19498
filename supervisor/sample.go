package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// onSample takes one probe result: it records it, then hands the
// decision core what the sample means for the state the instance is in
// (a waiting start, the watermark rules, a wake, [serve] idle).
func (l *loop) onSample(r sense.Result) {
	hung := l.pace.Answered() // already counted as a failure
	now := time.Now()
	defer l.pace.Reschedule(r, now) // after the period this result sets
	if n := l.ledger.Expire(now); len(n) > 0 {
		l.deps.Logf("%d admission lease(s) expired", len(n))
		l.s.adm.leasesChanged()
	}
	if l.deps.Meter != nil && !hung {
		l.deps.Meter.ObserveProbe(r.Took, r.Err)
	}
	l.fit.describe(l.cfg.Describe, r)
	if r.Err != nil {
		l.pace.SetPeriod(0, l.pol.Watch.Interval)
		l.feed(core.Gap{}, nil)
		l.health.Report(&l.out, now, now, r.Err.Error(), !hung)
		l.withoutReading(now, r)
		return
	}
	if down, told := l.health.Recovered(now); told { // a run of failures ends
		l.deps.Logf("GPU probe recovered after %s without a reading", down.Round(time.Millisecond))
	}
	l.faults.Answered(r.Sample, &l.out)
	l.latest.lastSample, l.latest.haveSample = r.Sample, true
	run := &l.life.run
	if run.child != nil && r.ForPID == run.child.PID() && r.Tree != nil && !sameTree(run.childTree, r.Tree) {
		run.childTree = make(map[int]bool, len(r.Tree))
		for _, pid := range r.Tree {
			run.childTree[pid] = true
		}
	}
	l.latest.devs = appendDevices(l.latest.devs[:0], r.Sample.Devices)
	if l.pol.Watch.Scope == policy.ScopeProcess {
		l.latest.procs = appendProcesses(l.latest.procs[:0], r.Sample.Processes)
		l.latest.ratio = core.ProcessRatio(core.Reading{Devices: l.latest.devs, Processes: l.latest.procs}, run.childTree, l.pol.Watch.Quota)
	} else {
		l.latest.ratio = core.DeviceRatio(l.latest.devs, l.pol)
	}
	l.pace.Observe(now, l.latest.ratio, l.pol)
	if run.child != nil {
		l.minute.Note(now, l.latest.ratio, worstGPU(r.Sample.Devices, l.pol), l.pol.Watermark, &l.out)
	}
	used, total, own := startUsage(r.Sample, run.childTree)
	l.feed(core.Settling{Now: now, Read: true, Running: run.child != nil, Used: used, Total: total}, nil)
	// Publish the sample before a start it may lead to, so that anyone who
	// sees the new child also sees the GPUs it was started against. (The
	// loop publishes after every event anyway.)
	if l.life.state == api.StateWaiting {
		l.publishSnapshot()
	}
	switch {
	case l.life.state == api.StateWaiting:
		l.feed(l.life.startFacts(now, r, l.faults.Any(), l.latest.claim(l.peers != nil, r.Due)), nil)
	case l.life.steady():
		if l.life.state == api.StateStarting {
			l.life.state = api.StateRunning
		}
		l.measure(now, used)
		if l.life.steady() { // the measure's next step may be under way
			l.applyWatermark(now)
		}
	}
	// What the child uses while it serves is the needs of a later wake
	// into a profile that states none: used, where it is the tree's own.
	if own && l.life.serving() && l.pol.Profiles[l.life.level].Serving() {
		l.latest.served = used
	}
	if l.core.Waking() {
		l.feed(l.wakeFacts(now, false, r.Due), nil)
	}
	// The door's activity is read only where [serve] idle can apply: it
	// takes the door's lock at each read.
	if l.pol.Serve.Idle > 0 {
		l.feed(l.life.idleFacts(now, l.s.act.read()), nil)
	}
}

// measure hands the core the newest sample while a live change's effect
// waits to be measured (core.Measured): what the child holds now (used,
// read the way its holding before the change was: startUsage), and the
// watermark.
func (l *loop) measure(now time.Time, used uint64) {
	if !l.core.Measuring() {
		return
	}
	coordinated, _ := l.self.sharing(l.pol)
	l.feed(core.Measured{Now: now, Ratio: l.latest.ratio, Used: used, Shared: coordinated}, nil)
}

// applyWatermark hands the watermark rules the newest ratio. A
// coordinated instance's verdict goes to the tenants of its GPU as a
// proposal (core.Propose); a lone one's is taken (or, in observe mode,
// only reported).
func (l *loop) applyWatermark(now time.Time) {
	in := core.Sample{Now: now, Ratio: l.latest.ratio, Predicted: l.pace.Forecast().Predicted,
		Ran: now.Sub(l.life.run.childStart), ETA: l.pace.Forecast().ETA.Seconds()}
	switch coordinated, notes := l.self.sharing(l.pol); {
	case coordinated:
		in.Shared, in.Proposing = true, l.peers.Proposing()
	case notes && l.cfg.Observe:
		in.PeerHeld = l.peers.Held(now)
	}
	l.feed(in, nil)
}

// onHung runs when a probe call has not returned within ProbeTimeout, and
// then every interval while it stays stuck: a hung call is a failed one,
// counted once; it stays in flight (a driver call cannot be interrupted)
// and no other starts, but the loop goes on without data.
func (l *loop) onHung(now time.Time) {
	if !l.pace.Overdue(now) {
		return
	}
	first := l.pace.Hang()
	if first && l.deps.Meter != nil {
		l.deps.Meter.ObserveProbe(now.Sub(l.pace.Due()), sense.ErrHung)
	}
	l.feed(core.Gap{}, nil)
	l.health.Report(&l.out, now, l.pace.Due(), fmt.Sprintf("%v: a call has not returned within %s", sense.ErrHung, l.pace.Timeout()), first)
	l.withoutReading(now, sense.Result{Err: sense.ErrHung})
	l.pace.Rearm(l.pol.Watch.Interval)
}

// withoutReading moves the states on after a probe call that brought no
// reading (r.Err: it failed, or it hangs): on_gpu_lost first, so that a
// lost GPU ends a wait rather than start a child only to stop it; then a
// start under way still ends at its cap (there is no reading to settle
// on), tracked before the states move as in onSample; a waiting start goes
// ahead without data, and a starting child counts as running, though
// unmeasured.
func (l *loop) withoutReading(now time.Time, r sense.Result) {
	if !l.life.end.finished && !l.life.stop.stopping && l.health.Lost(now, l.pol.Watch) {
		l.feed(core.Lost{Err: l.health.LostErr(), Running: l.life.run.child != nil, Restarting: l.life.plan != nil}, nil)
	}
	if l.life.end.finished {
		return
	}
	l.feed(core.Settling{Now: now, Running: l.life.run.child != nil}, nil)
	switch {
	case l.life.state == api.StateWaiting:
		l.feed(l.life.startFacts(now, r, l.faults.Any(), l.latest.claim(l.peers != nil, r.Due)), nil)
	case l.life.state == api.StateStarting && l.life.run.child != nil:
		l.life.state = api.StateRunning // up, though unmeasured
	}
}
