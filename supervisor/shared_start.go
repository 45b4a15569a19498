package supervisor

import (
	"context"
	"sync/atomic"
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

// startClaim is the one-start-at-a-time claim of this instance's starts
// (and live wakes, which take memory as a start does): its phase, its
// answers from the coordinator (on starts), and the settle rule of a
// start under way. The loop hands it what it needs as arguments.
type startClaim struct {
	c    Coordinator // nil: no other tenants to agree with
	logf func(format string, args ...any)
	// starting is the supervisor's flag, read live by TenantInfo: set
	// before a start claim is made, cleared when the start ends.
	starting *atomic.Bool
	starts   chan api.StartOutcome

	phase startPhase
	// granted is when the claim was granted: a sample due before it (in
	// flight then) must not choose the profile.
	granted    time.Time
	launchedAt time.Time
	settle     settleTracker
	// waitingFor is the tenant we last said we wait for ("" = none).
	waitingFor string
}

// claimCtx is what a claim is made with: the run's context and its end,
// the watched GPUs of the newest sample, [watch] settle, and the pacer a
// fresh sample is asked of once the claim is granted.
type claimCtx struct {
	ctx    context.Context
	done   <-chan struct{}
	devs   []gpu.Device
	settle time.Duration
	pace   *pacer
}

// forStart reports whether the start aiming at target may go ahead with
// sample r; if not, it has asked the coordinator (or is waiting for its
// answer). With when_full = "wait" nothing is claimed while no profile
// fits: tryStart waits for memory, and claims once something fits.
func (t *startClaim) forStart(r sampleResult, pol *policy.Policy, target int, cc claimCtx) bool {
	return t.gate(&r, cc, func() bool {
		if r.err != nil || pol.Restart.WhenFull != policy.WhenFullWait {
			return true
		}
		_, ok := core.PickProfile(pol, target, devices(r.sample.Devices))
		return ok
	})
}

// gate is the one-start-at-a-time gate of a start or a live wake, with
// sample r (nil: between samples). It reports whether that may go ahead:
// without a coordinator or a known GPU, at once; else once the claim is
// granted and r was taken after the grant, so that the fit is judged on
// what the last starter really uses. Otherwise it has asked the
// coordinator (when worth says a claim is worth holding), or waits for
// its answer or for a fresh sample.
func (t *startClaim) gate(r *sampleResult, cc claimCtx, worth func() bool) bool {
	switch {
	case t.c == nil:
		return true
	case t.phase == startClaiming:
		return false
	case t.phase == startGranted && (r == nil || r.due.Before(t.granted)):
		cc.pace.sampleNow()
		return false
	case t.phase != startIdle:
		return true
	}
	gpus := watchedUUIDs(cc.devs)
	if len(gpus) == 0 || !worth() {
		return true // no GPU known: nothing to agree on
	}
	t.claimStart(cc.ctx, cc.done, gpus, cc.settle)
	return false
}

// claimStart claims the start of gpus, off the loop; the answer comes
// back on starts.
func (t *startClaim) claimStart(ctx context.Context, done <-chan struct{}, gpus []string, settle time.Duration) {
	// Say so before claiming: a tenant that sees our claim must see us
	// starting, or it would take the claim over.
	t.starting.Store(true)
	t.phase = startClaiming
	c, out := t.c, t.starts
	go func() {
		o := c.ClaimStart(ctx, gpus, settle)
		select {
		case out <- o:
		case <-done:
		}
	}()
}

// answer takes ClaimStart's answer; wanted says the instance still waits
// to start (or to wake live), with no stop under way and the run not
// over. A granted claim asks pace for a fresh sample to choose on.
func (t *startClaim) answer(o api.StartOutcome, wanted bool, pace *pacer) {
	if t.phase != startClaiming {
		return
	}
	if !wanted {
		t.endStarting("")
		return
	}
	if t.claimed(o) {
		pace.sampleNow()
	}
}

// claimed takes the answer to a claim made while the instance still
// waits to start; it reports whether the start was granted (or goes
// ahead anyway, the coordinator having failed): then the profile is
// chosen on a fresh sample.
func (t *startClaim) claimed(o api.StartOutcome) bool {
	if o.Err != nil {
		t.logf("cannot claim the start on GPU %s (%v); starting anyway", o.GPU, o.Err)
	} else if !o.Granted {
		t.phase = startIdle
		t.starting.Store(false)
		if t.waitingFor != o.Holder {
			t.waitingFor = o.Holder
			t.logf("waiting for %s to finish starting on GPU %s (one start at a time)", o.Holder, o.GPU)
		}
		return false
	}
	t.waitingFor = ""
	t.phase, t.granted = startGranted, time.Now()
	return true
}

// began follows a launch (or a live wake) at now, with the newest sample
// s and the child's processes tree: the start lasts until the child
// settles.
func (t *startClaim) began(now time.Time, s gpu.Sample, tree map[int]bool, settle time.Duration) {
	used, _, own := startUsage(s, tree)
	if own {
		used = 0 // the new child's own usage starts from nothing
	}
	t.launched(now, used, settle)
}

// launched follows a launch with the memory used then: a granted start
// now lasts until the child settles; any other ends.
func (t *startClaim) launched(now time.Time, used uint64, settle time.Duration) {
	if t.phase != startGranted {
		t.endStarting("")
		return
	}
	t.phase = startLaunched
	t.launchedAt = now
	t.settle = newSettleTracker(now, settle, used)
}

// sample feeds sample r to the settle tracker of a starting child
// (running: one runs, with processes tree).
func (t *startClaim) sample(now time.Time, r sampleResult, running bool, tree map[int]bool, settle time.Duration) {
	if t.phase != startLaunched || !running {
		return
	}
	used, total, _ := startUsage(r.sample, tree)
	t.track(now, r.err == nil, used, total, settle)
}

// track ends a start whose child's memory has been flat for settle (ok:
// the sample read used of total), or that has lasted StartHoldFactor x
// settle.
func (t *startClaim) track(now time.Time, ok bool, used, total uint64, settle time.Duration) {
	switch {
	case ok && t.settle.observe(now, used, total):
		t.endStarting("its memory has not grown for " + settle.String())
	case now.Sub(t.launchedAt) >= api.StartHoldFactor*settle:
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
func (t *startClaim) endStarting(why string) {
	if t.phase == startLaunched && why != "" {
		t.logf("start complete: %s", why)
	}
	t.phase = startIdle
	t.starting.Store(false)
}

// watchedUUIDs are the UUIDs of the watched GPUs devs.
func watchedUUIDs(devs []gpu.Device) []string {
	var out []string
	for _, d := range devs {
		if d.UUID != "" {
			out = append(out, d.UUID)
		}
	}
	return out
}
