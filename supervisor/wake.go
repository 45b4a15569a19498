package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// Requested is the front door's report of a request's arrival; held says
// it found the child not ready, so it waits. It never blocks: the time is
// stored for the idle rule, and a held request asks the loop to wake a
// sleeping server ([serve] wake).
func (s *Supervisor) Requested(held bool) {
	s.lastRequest.Store(time.Now().UnixNano())
	if !held {
		return
	}
	select {
	case s.wanted <- struct{}{}:
	default: // a wake is already asked for
	}
}

// onWanted takes a held request's wish to wake the server.
func (z *sleeper) onWanted(v sleepView) {
	if !v.pol.Serve.Wake || v.profile(*v.level).Serving() || *v.stopping || *v.finished {
		return
	}
	z.want = true
	z.tryWake(v, nil)
}

// claimWanted reports whether an answer to a start claim is still wanted
// in state: a waiting start's, or a live wake's (which claims as a start
// does).
func (z *sleeper) claimWanted(state string) bool {
	return state == api.StateWaiting || state == api.StateAsleep && z.want
}

// tryWake steps up to the nearest serving profile (core.WakeTo) for a
// held request, as soon as it can: a stopped child is started again (the
// start waits for that profile to fit, in the shared-GPU start order); a
// sleeping one is woken live once the profile fits (core.WakeFit) and, on
// a shared GPU, once it holds the one-start-at-a-time claim. It runs at
// every sample until then; r is that sample, nil when a request asks
// between samples.
func (z *sleeper) tryWake(v sleepView, r *sampleResult) {
	if !z.want {
		return
	}
	to := core.WakeTo(v.pol.Profiles, *v.level)
	if to < 0 {
		z.want = false
		if *v.state != api.StateWaiting && v.claim.phase == startGranted {
			v.claim.endStarting("") // a wake's claim, no longer needed
		}
		return
	}
	const why = "a request arrived while asleep"
	switch {
	case v.stoppedAsleep():
		z.want = false
		z.wakeStopped(v, to, api.ReasonRequest, why, nil)
	case *v.child != nil && *v.state == api.StateAsleep && !v.acts.acting() && *v.plan == nil && !*v.stopping:
		if fit := z.wakeFit(v, to); fit != "" {
			if v.claim.phase == startGranted {
				v.claim.endStarting("") // the claim's fresh sample says it does not fit
			}
			return // not yet: the request waits, up to hold
		}
		// A server that wakes takes back the memory it freed, as a start
		// takes memory, so on a shared GPU it goes in the start order: it
		// claims the one start at a time first (its peers see it
		// starting), and its fit is judged again on a sample taken after
		// the grant, as a start's is.
		if !v.claim.gate(r, v.claims, func() bool { return true }) {
			return
		}
		z.want = false
		now := time.Now()
		v.rules.Stepped(now)
		if v.do.changeProfile(to, api.ReasonRequest, why, nil) {
			v.claim.began(now, v.sample, v.tree, v.claims.settle) // the claim lasts until the woken server's memory settles
		} else if v.claim.phase == startGranted {
			v.claim.endStarting("")
		}
	}
}

// sample runs the wake and idle rules after each sample r.
func (z *sleeper) sample(v sleepView, now time.Time, r sampleResult) {
	z.noteServed(v, r)
	z.tryWake(v, &r)
	z.checkIdle(v, now)
}

// checkIdle hands the decision core [serve] idle's facts (core.IdleCheck):
// whether the server can answer (a front door saw it healthy, it runs,
// nothing else is under way), and since when it has had nothing to do.
func (z *sleeper) checkIdle(v sleepView, now time.Time) {
	if v.pol.Serve.Idle <= 0 || v.door == nil {
		return
	}
	ready := *v.child != nil && v.door.healthy && !*v.stopping && *v.plan == nil && !v.acts.acting() &&
		*v.state == api.StateRunning
	since := v.childStart
	if z.awake.After(since) {
		since = z.awake
	}
	if v.lastRequest.After(since) {
		since = v.lastRequest
	}
	v.do.doAll(v.do.decide(core.IdleCheck{Now: now, Since: since, Ready: ready}), nil)
}

// noteServed keeps what the child's processes use while it serves, for a
// later wake's fit (wakeFit).
func (z *sleeper) noteServed(v sleepView, r sampleResult) {
	if r.err != nil || r.sample.ProcessesAt.IsZero() || *v.child == nil || *v.state != api.StateRunning ||
		v.acts.acting() || !v.profile(*v.level).Serving() {
		return
	}
	var used uint64
	for _, p := range r.sample.Processes {
		if v.tree[p.PID] {
			used += p.Used
		}
	}
	z.served = used
}

// wakeFit is stepFit for a wake: see core.WakeFit.
func (z *sleeper) wakeFit(v sleepView, to int) string {
	var r *core.Reading
	if v.have {
		r = reading(v.sample)
	}
	return core.WakeFit(v.pol, *v.level, to, r, v.tree, z.served)
}
