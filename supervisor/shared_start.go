package supervisor

import (
	"context"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// One start at a time on a shared GPU: before a launch the loop claims the
// start of every watched GPU (off the loop), waits while another tenant is
// starting, then chooses the profile on a sample taken after the grant, so
// `needs` is checked against what the earlier tenant really uses. Its own
// start lasts until the child's memory is flat for `settle`, the child
// says ready, 10 x settle pass, or the child exits.

type startPhase int

const (
	startIdle     startPhase = iota
	startClaiming            // ClaimStart is running
	startGranted             // claimed: launch on the next fresh sample
	startLaunched            // the child runs and has not settled
)

type startState struct {
	phase startPhase
	// granted is when the claim was granted: a sample due before it (in
	// flight then) must not choose the profile.
	granted  time.Time
	launched time.Time
	settle   settleTracker
	// waitingFor is the tenant we last said we wait for ("" = none).
	waitingFor string
}

// startClaimed reports whether the start may go ahead with sample r; if
// not, it has asked the coordinator (or is waiting for its answer). With
// when_full = "wait" nothing is claimed while no profile fits: tryStart
// waits for memory, and claims once something fits.
func (l *loop) startClaimed(r sampleResult) bool {
	return l.claimGate(&r, func() bool {
		if r.err != nil || l.pol.Restart.WhenFull != policy.WhenFullWait {
			return true
		}
		_, ok := core.PickProfile(l.pol, l.life.wait.target, devices(r.sample.Devices))
		return ok
	})
}

// claimGate is the one-start-at-a-time gate of a start or a live wake
// (wakeClaimed), with sample r (nil: between samples). It reports whether
// that may go ahead: without a coordinator or a known GPU, at once; else
// once the claim is granted and r was taken after the grant, so that the
// fit is judged on what the last starter really uses. Otherwise it has
// asked the coordinator (when worth says a claim is worth holding), or
// waits for its answer or for a fresh sample.
func (l *loop) claimGate(r *sampleResult, worth func() bool) bool {
	st := &l.shared.start
	switch {
	case l.shared.c == nil:
		return true
	case st.phase == startClaiming:
		return false
	case st.phase == startGranted && (r == nil || r.due.Before(st.granted)):
		l.pace.sampleNow()
		return false
	case st.phase != startIdle:
		return true
	}
	gpus := l.watchedUUIDs()
	if len(gpus) == 0 || !worth() {
		return true // no GPU known: nothing to agree on
	}
	l.shared.claimStart(l.ctx, l.s.done, gpus, l.pol.Watch.Settle)
	return false
}

// claimStart claims the start of gpus, off the loop; the answer comes
// back on starts.
func (t *sharedState) claimStart(ctx context.Context, done <-chan struct{}, gpus []string, settle time.Duration) {
	// Say so before claiming: a tenant that sees our claim must see us
	// starting, or it would take the claim over.
	t.starting.Store(true)
	t.start.phase = startClaiming
	c, out := t.c, t.starts
	go func() {
		o := c.ClaimStart(ctx, gpus, settle)
		select {
		case out <- o:
		case <-done:
		}
	}()
}

// onStartClaim takes ClaimStart's answer.
func (l *loop) onStartClaim(o api.StartOutcome) {
	if l.shared.start.phase != startClaiming {
		return
	}
	waking := l.life.state == api.StateAsleep && l.wake.want // a live wake claims as a start does (wake.go)
	if (l.life.state != api.StateWaiting && !waking) || l.life.stop.stopping || l.life.end.finished {
		l.shared.endStarting("")
		return
	}
	if l.shared.claimed(o) {
		l.pace.sampleNow()
	}
}

// claimed takes the answer to a claim made while the instance still
// waits to start; it reports whether the start was granted (or goes
// ahead anyway, the coordinator having failed): then the profile is
// chosen on a fresh sample.
func (t *sharedState) claimed(o api.StartOutcome) bool {
	st := &t.start
	if o.Err != nil {
		t.logf("cannot claim the start on GPU %s (%v); starting anyway", o.GPU, o.Err)
	} else if !o.Granted {
		st.phase = startIdle
		t.starting.Store(false)
		if st.waitingFor != o.Holder {
			st.waitingFor = o.Holder
			t.logf("waiting for %s to finish starting on GPU %s (one start at a time)", o.Holder, o.GPU)
		}
		return false
	}
	st.waitingFor = ""
	st.phase, st.granted = startGranted, time.Now()
	return true
}

// beganStarting follows a launch: the start lasts until the child settles.
func (l *loop) beganStarting(now time.Time) {
	used, _, own := startUsage(l.latest.lastSample, l.life.run.childTree)
	if own {
		used = 0 // the new child's own usage starts from nothing
	}
	l.shared.launched(now, used, l.pol.Watch.Settle)
}

// launched follows a launch with the memory used then: a granted start
// now lasts until the child settles; any other ends.
func (t *sharedState) launched(now time.Time, used uint64, settle time.Duration) {
	st := &t.start
	if st.phase != startGranted {
		t.endStarting("")
		return
	}
	st.phase = startLaunched
	st.launched = now
	st.settle = newSettleTracker(now, settle, used)
}

// trackStart feeds a sample to the settle tracker of a starting child.
func (l *loop) trackStart(now time.Time, r sampleResult) {
	if l.shared.start.phase != startLaunched || l.life.run.child == nil {
		return
	}
	used, total, _ := startUsage(r.sample, l.life.run.childTree)
	l.shared.track(now, r.err == nil, used, total, l.pol.Watch.Settle)
}

// track ends a start whose child's memory has been flat for settle (ok:
// the sample read used of total), or that has lasted StartHoldFactor x
// settle.
func (t *sharedState) track(now time.Time, ok bool, used, total uint64, settle time.Duration) {
	st := &t.start
	switch {
	case ok && st.settle.observe(now, used, total):
		t.endStarting("its memory has not grown for " + settle.String())
	case now.Sub(st.launched) >= api.StartHoldFactor*settle:
		t.endStarting("10 x settle (" + (api.StartHoldFactor * settle).String() + ") passed")
	}
}

// startUsage is what the settle rule watches: the child tree's own usage
// over the watched GPUs when the backend knows processes, else the
// devices' used memory; and the memory that is out of.
func startUsage(s gpu.Sample, tree map[int]bool) (used, total uint64, own bool) {
	for _, d := range s.Devices {
		total += d.Total
	}
	if s.ProcessesAt.IsZero() {
		for _, d := range s.Devices {
			used += d.Used
		}
		return used, total, false
	}
	for _, p := range s.Processes {
		if tree[p.PID] {
			used += p.Used
		}
	}
	return used, total, true
}

// endStarting ends this instance's start (or an attempt at one): the other
// tenants may start theirs. why is logged when a start completes.
func (t *sharedState) endStarting(why string) {
	st := &t.start
	if st.phase == startLaunched && why != "" {
		t.logf("start complete: %s", why)
	}
	st.phase = startIdle
	t.starting.Store(false)
}

// watchedUUIDs are the UUIDs of the watched GPUs from the newest sample.
func (l *loop) watchedUUIDs() []string {
	var out []string
	for _, d := range l.latest.lastSample.Devices {
		if d.UUID != "" {
			out = append(out, d.UUID)
		}
	}
	return out
}
